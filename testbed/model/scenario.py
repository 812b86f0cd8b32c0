"""Scenario file (DESIGN §3.1): strict pydantic models and a loader whose errors are one sentence."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal, Union

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from testbed.model.errors import InputError
from testbed.model.fabric_kinds import KINDS, FabricKind, kind_specific_fields

CollectiveOp = Literal["allreduce", "allgather", "reducescatter", "alltoall", "sendrecv", "broadcast"]
Algorithm = Literal["ring", "halving-doubling", "tree", "ps", "byteps", "ina"]

# Fields that only mean something for some fabric kinds (the registry's); setting them elsewhere
# is a mistake.
KIND_SPECIFIC_FIELDS = kind_specific_fields()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class Fabric(_Strict):
    kind: FabricKind
    hosts: int = Field(ge=2, le=1024)
    gpu_bandwidth_gbps: float = Field(gt=0)
    latency_us: float = Field(default=1.0, ge=0)
    gpus_per_server: int = Field(default=8, ge=1)
    server_uplink_gbps: float = Field(default=400.0, gt=0)
    ocs_switches: int | None = Field(default=None, ge=1)
    reconfig_us: float | None = Field(default=None, ge=0)
    multi_shot: bool = False
    wavelengths: int | None = Field(default=None, ge=1)
    wavelength_gbps: float = Field(default=25.0, gt=0)
    neighbors: int = Field(default=16, ge=1)
    estimate_period_us: float = Field(default=100.0, gt=0)
    aggregation_gbps: float | None = Field(default=None, gt=0)
    slots: int | None = Field(default=None, ge=1)
    workers_per_job: int | None = Field(default=None, ge=1)
    sharing: Literal["reserved", "shared"] = "reserved"  # ina slots: SwitchML-reserved or ATP-shared
    node_drop_frac: float = Field(default=0.0, ge=0, lt=1)  # ina: loss injected in the node's pipeline
    link_loss_frac: float = Field(default=0.0, ge=0, lt=1)  # ina: loss of INA packets on every link
    cpu_servers: int = Field(default=0, ge=0)
    leaf_hosts: int = Field(default=4, ge=1)  # elect-fattree: GPUs per leaf switch
    spines: int = Field(default=2, ge=1)  # elect-fattree: spine switches, each wired to every leaf
    # elect-fattree: a leaf's GPU bandwidth over its uplinks' (1: non-blocking; 4: uplinks carry a quarter)
    oversubscription: float = Field(default=1.0, ge=1.0)

    @model_validator(mode="after")
    def _kind_specific(self) -> "Fabric":
        for field in sorted(self.model_fields_set):
            if not _applies(field, self.kind):
                owners = KIND_SPECIFIC_FIELDS[field]
                raise ValueError(f"field '{field}' applies only to kind {' or '.join(owners)}, not {self.kind}")
        problem = KINDS[self.kind].check(self)
        if problem:
            raise ValueError(problem)
        return self


class ModelWorkload(_Strict):
    name: str  # resnet50 | transformer | megatron, or the name given in `profile`
    global_batch: int = Field(ge=1)
    mp: int = Field(default=1, ge=1)
    dp: int = Field(default=1, ge=1)
    degree: int | None = Field(default=None, ge=1)  # default: the fabric's (Q for sip-ocs)
    device: str = "v100"
    # constant: every op at the device's large-GEMM throughput; waves: a GEMM piece too small to
    # fill the GPU's multiprocessors with output tiles gets less (testbed/placer/profiles.py)
    efficiency: Literal["constant", "waves"] = "constant"
    profile: str | None = None  # a user op profile (YAML/JSON) instead of the zoo model
    tau_us: float = Field(default=10.0, gt=0)
    # DP all-reduce in buckets of this many bytes, each started as the backward compute fills it
    # (PyTorch DDP's 25 MB); 0: one all-reduce after the whole backward pass
    dp_bucket_bytes: int = Field(default=25_000_000, ge=0)
    # Convolutions may be cut by rows (a spatial split) where that moves fewer bytes than a channel
    # split; false: channel splits only
    spatial_splits: bool = True


class Workload(_Strict):
    kind: Literal["collective", "model", "trace", "chakra"]
    collective: CollectiveOp | None = None
    algorithm: Algorithm = "ring"
    bytes: int | None = Field(default=None, gt=0)
    model: ModelWorkload | None = None
    trace: str | None = None
    path: str | None = None  # chakra: the directory of <prefix>.<rank>.et files
    # chakra: process group name -> its ranks, for groups the trace's metadata does not list
    process_groups: dict[str, list[int]] | None = None
    iterations: int = Field(default=3, ge=1, le=10000)

    @model_validator(mode="after")
    def _kind_fields(self) -> "Workload":
        if self.kind == "collective":
            if self.collective is None:
                raise ValueError("kind collective needs 'collective' (e.g. allreduce)")
            if self.bytes is None:
                raise ValueError("kind collective needs 'bytes' (the real-world message size)")
        if self.kind == "model" and self.model is None:
            raise ValueError("kind model needs a 'model' section")
        if self.kind == "trace" and self.trace is None:
            raise ValueError("kind trace needs 'trace' (a path)")
        if self.kind == "chakra" and self.path is None:
            raise ValueError("kind chakra needs 'path' (the directory of its <prefix>.<rank>.et files)")
        if self.path is not None and self.kind != "chakra":
            raise ValueError("'path' belongs to kind chakra (a trace directory); kind trace takes 'trace'")
        if self.process_groups is not None and self.kind != "chakra":
            raise ValueError("'process_groups' belongs to kind chakra")
        return self


class Emulation(_Strict):
    dilation: Union[Literal["auto"], float] = "auto"
    byte_scale: Union[Literal["auto"], float] = "auto"
    # Wall time the user allows for the measured iterations; `auto` sizes the run to fit it.
    max_wall_s: float = Field(default=60.0, gt=0)
    # Unmeasured iterations first: TCP windows open and buffers fault in before timing starts.
    # Unset: 2 for collectives (all-to-all and send/recv use each connection once an iteration,
    # and its window is still opening in the second), 1 for placed models (long iterations that
    # reuse every connection many times).
    warmup_iterations: int | None = Field(default=None, ge=0, le=100)
    # Fraction of the calibrated forwarding capacity that `auto` lets the run use.
    capacity_fraction: float = Field(default=0.6, gt=0, le=1)

    @field_validator("dilation", "byte_scale", mode="before")
    @classmethod
    def _auto_or_positive(cls, value: Any, info: ValidationInfo) -> Any:
        if value == "auto":
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"'{info.field_name}' must be 'auto' or a number greater than 0 (got {value!r})")
        return float(value)


FaultKind = Literal["link_loss", "link_down", "agent_kill", "controller_restart", "node_restart"]
HOST_FAULTS = ("link_loss", "link_down", "agent_kill")


class Fault(_Strict):
    """One injected fault, timed in real-world milliseconds after the host agents start (warm-up
    iterations included). link_loss and link_down last `duration_ms` (unset: the rest of the run)."""

    kind: FaultKind
    at_ms: float = Field(ge=0)
    host: int | None = Field(default=None, ge=0)  # link_loss, link_down, agent_kill: whose link or agent
    loss_frac: float | None = Field(default=None, gt=0, lt=1)  # link_loss
    duration_ms: float | None = Field(default=None, gt=0)  # link_loss, link_down

    @model_validator(mode="after")
    def _fields_of_kind(self) -> "Fault":
        if (self.host is None) == (self.kind in HOST_FAULTS):
            raise ValueError(f"fault {self.kind} " + ("needs 'host' (a GPU rank)" if self.host is None
                                                        else "takes no 'host'"))
        if (self.loss_frac is None) == (self.kind == "link_loss"):
            raise ValueError(f"fault {self.kind} " + ("needs 'loss_frac'" if self.loss_frac is None
                                                        else "takes no 'loss_frac'"))
        if self.duration_ms is not None and self.kind not in ("link_loss", "link_down"):
            raise ValueError(f"fault {self.kind} takes no 'duration_ms' (it happens once)")
        return self


class Scenario(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    seed: int = 0
    fabric: Fabric
    workload: Workload
    emulation: Emulation = Emulation()
    faults: list[Fault] = Field(default_factory=list)

    def warmups(self) -> int:
        """Unmeasured iterations before the measured ones (emulation.warmup_iterations, resolved)."""
        if self.emulation.warmup_iterations is not None:
            return self.emulation.warmup_iterations
        return 1 if self.workload.kind == "model" else 2

    def loses_packets(self) -> bool:
        """Whether packets are lost on purpose, by the fabric or by an injected fault."""
        return self.fabric.link_loss_frac + self.fabric.node_drop_frac > 0 or \
            any(fault.loss_frac for fault in self.faults)

    @model_validator(mode="after")
    def _sizes_agree(self) -> "Scenario":
        model = self.workload.model
        if self.workload.kind == "model" and model is not None and model.mp * model.dp != self.fabric.hosts:
            raise ValueError(f"workload.model mp×dp = {model.mp}×{model.dp} = {model.mp * model.dp} must equal "
                             f"fabric.hosts ({self.fabric.hosts})")
        for name, ranks in (self.workload.process_groups or {}).items():
            if len(set(ranks)) != len(ranks) or any(not 0 <= r < self.fabric.hosts for r in ranks):
                raise ValueError(f"workload.process_groups.{name} must list distinct ranks in "
                                 f"0..{self.fabric.hosts - 1} (got {ranks})")
        for index, fault in enumerate(self.faults):
            if fault.host is not None and fault.host >= self.fabric.hosts:
                raise ValueError(f"faults[{index}]: host {fault.host} does not exist "
                                 f"(ranks 0..{self.fabric.hosts - 1})")
            node = KINDS[self.fabric.kind].aggregation_node
            if fault.kind == "node_restart" and not node:
                raise ValueError(f"faults[{index}]: node_restart needs an aggregation node (fabric.kind ina)")
            if fault.kind == "controller_restart" and node:
                raise ValueError(f"faults[{index}]: an ina fabric has no controller to restart")
        return self


def _field_path(loc: tuple[Any, ...]) -> str:
    # pydantic puts union-branch tags in loc (e.g. 'float', "literal['auto']"); they are not fields.
    parts = (str(p) for p in loc if not (isinstance(p, str) and ("[" in p or p in {"float", "int"})))
    # a key the user typed may hold anything: show control characters escaped, on one line
    return ".".join(p if p.isprintable() else repr(p)[1:-1] for p in parts)


def _known_fields(loc: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = Scenario
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        candidates = [a for a in getattr(annotation, "__args__", (annotation,)) if isinstance(a, type)]
        models = [a for a in candidates if issubclass(a, BaseModel)]
        if not models:
            return []
        model = models[0]
    return list(model.model_fields)


def describe_validation_error(error: ValidationError, source: str) -> str:
    """Turn pydantic's report into one sentence naming the file and the field."""
    # A misspelt field also shows up as the missing real one: report the misspelling first.
    errors = sorted(error.errors(), key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    loc = tuple(first["loc"])
    where = _field_path(loc) or "(top level)"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    if first["type"] == "extra_forbidden":
        known = _known_fields(loc)
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"allowed fields here: {', '.join(known)}"
        return f"{source}: unknown field '{where}'; {hint}{more}"
    if first["type"] == "missing":
        return f"{source}: missing required field '{where}'; add it{more}"
    message = first["msg"].removeprefix("Value error, ")
    got = first.get("input")
    got_text = "" if isinstance(got, (dict, list)) or got is None else f" (got {got!r})"
    if first["type"] == "value_error":
        return f"{source}: {where}: {message}{more}"
    return f"{source}: field '{where}': {message}{got_text}{more}"


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    if not isinstance(data, dict):
        raise InputError(f"{source}: a scenario must be a YAML mapping with name, fabric and workload")
    try:
        return Scenario.model_validate(data)
    except ValidationError as error:
        raise InputError(describe_validation_error(error, source)) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; every problem becomes an InputError."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such scenario file; check the path")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}: not valid YAML{line}; fix the syntax") from None
    workload = data.get("workload") if isinstance(data, dict) else None
    for field in ("trace", "path"):
        if isinstance(workload, dict) and isinstance(workload.get(field), str):
            # a trace's path is relative to the scenario file, wherever testbed runs from
            workload[field] = str((path.parent / workload[field]).resolve())
    return parse_scenario(data, str(path))


def apply_overrides(scenario: Scenario, overrides: dict[str, Any]) -> Scenario:
    """Return a copy with dotted-path overrides applied (e.g. {'fabric.hosts': 4}), re-validated."""
    data = scenario.model_dump(mode="python", exclude_unset=True)
    for dotted, value in overrides.items():
        node = data
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return parse_scenario(data, f"{scenario.name} (with overrides)")


def _applies(field: str, kind: str) -> bool:
    """Whether a fabric field belongs to this kind (fields of every kind do)."""
    owners = KIND_SPECIFIC_FIELDS.get(field)
    return owners is None or kind in owners


def scenario_to_yaml(scenario: Scenario, resolved: dict[str, Any] | None = None) -> str:
    """The scenario with every default filled in (and `resolved` emulation values); it re-validates."""
    data = scenario.model_dump(mode="json", exclude_none=True)
    data["fabric"] = {k: v for k, v in data["fabric"].items() if _applies(k, scenario.fabric.kind)}
    if resolved:
        data["emulation"].update(resolved)
    return str(yaml.safe_dump(data, sort_keys=False))

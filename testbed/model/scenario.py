"""Scenario file (DESIGN §3.1): the strict pydantic models of its workload, emulation and faults,
and the scenario generic in its fabric section (each kind's own, testbed/fabrics/<kind>/section.py;
the loader that knows them all is testbed.fabrics.scenario_file)."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar, Union

from pydantic import Field, ValidationInfo, field_validator, model_validator

from testbed.model.fabric_section import FabricSection, Strict
from testbed.model.limits import MAX_COLLECTIVE_BYTES

CollectiveOp = Literal["allreduce", "allgather", "reducescatter", "alltoall", "sendrecv", "broadcast", "reduce",
                       "gather", "scatter"]
Algorithm = Literal["ring", "halving-doubling", "tree", "direct", "ps", "byteps", "ina"]

class ModelWorkload(Strict):
    name: str  # resnet50 | transformer | megatron, or the name given in `profile`
    global_batch: int = Field(ge=1)  # samples per iteration over all DP groups (B)
    mp: int = Field(default=1, ge=1)  # GPUs a model-parallel group splits each op over (k)
    dp: int = Field(default=1, ge=1)  # data-parallel groups (l): the job takes mp·dp GPUs
    degree: int | None = Field(default=None, ge=1)  # default: the fabric's (Q for sip-ocs)
    device: str = "v100"  # the GPU whose compute profile times the ops: v100, a100 or h100
    # constant: every op at the device's large-GEMM throughput; waves: a GEMM piece too small to
    # fill the GPU's multiprocessors with output tiles gets less (testbed/placer/profiles.py);
    # paper: SiP-ML §4.2's model: waves over the sample dimension at the local batch, and a split
    # of the model along any other dimension divides that time linearly
    efficiency: Literal["constant", "waves", "paper"] = "constant"
    profile: str | None = None  # a user op profile (YAML/JSON) instead of the zoo model
    # SiP-ML's balance target: an op is split into parts of about this much compute (fewer where
    # the degree or the op's size caps them)
    tau_us: float = Field(default=10.0, gt=0)
    # DP all-reduce in buckets of this many bytes, each started as the backward compute fills it
    # (PyTorch DDP's 25 MB); 0: one all-reduce after the whole backward pass
    dp_bucket_bytes: int = Field(default=25_000_000, ge=0)
    # Convolutions may be cut by rows (a spatial split) where that moves fewer bytes than a channel
    # split; false: channel splits only
    spatial_splits: bool = True
    # What the DP all-reduce moves per parameter: fp16 (mixed precision's gradients, 2 bytes) or
    # fp32 (4 bytes: twice the model's fp16 parameter bytes)
    gradient_precision: Literal["fp16", "fp32"] = "fp16"
    # true: a weighted op after a channel-cut one is cut by input channel (Megatron's column/row
    # pairs: its output is partial sums, nothing is gathered); false: every weighted op is cut by
    # output channel and needs its whole input (SiP-ML §3.2's split, a broadcast pattern)
    split_pairing: bool = True


class Workload(Strict):
    # what trains: a collective, a model SiP-ML places, a JSON trace or Chakra traces (jobs: the
    # scenario's `jobs` list, run together; a file writes `jobs:`, not this kind)
    kind: Literal["collective", "model", "trace", "chakra", "jobs"]
    collective: CollectiveOp | None = None  # collective: which one every GPU takes part in
    # collective: how it runs (ps and byteps need a ps or elect-cluster fabric, ina an ina fabric)
    algorithm: Algorithm = "ring"
    bytes: int | None = Field(default=None, gt=0, le=MAX_COLLECTIVE_BYTES)  # collective: the real-world buffer size
    model: ModelWorkload | None = None  # model: what SiP-ML's placer splits over the GPUs (below)
    trace: str | None = None  # trace: a JSON schedule or trace file, relative to the scenario
    path: str | None = None  # chakra: the directory of <prefix>.<rank>.et files
    # chakra: process group name -> its ranks, for groups the trace's metadata does not list
    process_groups: dict[str, list[int]] | None = None
    # chakra: a comm-group file in ASTRA-sim's format ({"1": [0, 1, 2, 3], ...}), relative to the scenario
    comm_groups: str | None = None
    iterations: int = Field(default=3, ge=1, le=10000)  # measured iterations, after the warm-up ones

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
        if self.comm_groups is not None and self.kind != "chakra":
            raise ValueError("'comm_groups' belongs to kind chakra (a comm-group JSON file)")
        return self


class Emulation(Strict):
    # how many times slower than real time the run goes, so this machine can forward its rates;
    # auto: from the calibration, the fabric's rates and max_wall_s
    dilation: Union[Literal["auto"], float] = "auto"
    # the share of every message's bytes actually sent (times stay real-world); auto: 1, or more
    # where messages would be too small to time
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


class Fault(Strict):
    """One injected fault, timed in real-world milliseconds after the host agents start (warm-up
    iterations included). link_loss and link_down last `duration_ms` (unset: the rest of the run)."""

    kind: FaultKind  # what fails (docs/faults.md)
    at_ms: float = Field(ge=0)  # when, in real-world ms after every host agent connected (warm-ups included)
    host: int | None = Field(default=None, ge=0)  # link_loss, link_down, agent_kill: whose link or agent
    loss_frac: float | None = Field(default=None, gt=0, lt=1)  # link_loss: the share of packets lost
    duration_ms: float | None = Field(default=None, gt=0)  # link_loss, link_down: how long (unset: the rest of the run)

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


F = TypeVar("F", bound=FabricSection, covariant=True)


JOB_ALGORITHMS_REFUSED = ("ps", "byteps", "ina")  # their summation services or node are not per job


class Job(Strict):
    """One training job of several on the fabric: its GPUs (a count, taken in order from those the
    jobs before it left, or host indices) and its workload."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")  # names the job in predictions and results
    # a count, taken in order from the GPUs the jobs before it left, or a list of host indices
    gpus: int | list[int]
    workload: Workload  # any workload but jobs (a `workload` section)

    @model_validator(mode="after")
    def _one_job(self) -> "Job":
        if self.workload.kind == "jobs":
            raise ValueError("a job's workload cannot itself be jobs")
        if self.workload.kind == "collective" and self.workload.algorithm in JOB_ALGORITHMS_REFUSED:
            raise ValueError(f"a job's collective cannot use algorithm {self.workload.algorithm} (its summation "
                             f"services are shared, not the job's); use ring, halving-doubling or tree")
        if isinstance(self.gpus, int) and self.gpus < 1:
            raise ValueError("gpus must be a positive count or a list of host indices")
        return self


class ScenarioOf(Strict, Generic[F]):
    """A scenario file. Its `fabric` is one kind's section: testbed.fabrics.scenario_file parses a
    file into ScenarioOf[AnyFabric], the discriminated union of every registered kind's section."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # names runs and reports
    seed: int = 0  # of the gradients' data and every random choice, so a run can be repeated
    fabric: F  # the interconnect: one kind's section (`fabric`, below)
    workload: Workload  # what trains on it (`workload`, below)
    jobs: list[Job] | None = None  # several jobs on one fabric, instead of `workload` (below)
    # several jobs on SiP-OCS or SiP-Ring: shared (the controller plans circuits or wavelengths for
    # every job's traffic at once) or partitioned (each job has a fixed share, in proportion to its
    # GPUs, of the OCS switches or the wavelengths, planned from its own traffic alone)
    job_sharing: Literal["shared", "partitioned"] = "shared"
    emulation: Emulation = Emulation()  # how the run is fitted to this machine (below)
    faults: list[Fault] = Field(default_factory=list)  # injected during the run (below)

    @model_validator(mode="before")
    @classmethod
    def _jobs_are_the_workload(cls, data: Any) -> Any:
        """`jobs:` replaces `workload:`; inside, the workload is of kind jobs, iterating as the job
        that asks most."""
        if not isinstance(data, dict) or data.get("jobs") is None:
            return data
        if data.get("workload") not in (None, {"kind": "jobs"}) and not (
                isinstance(data.get("workload"), dict) and data["workload"].get("kind") == "jobs"):
            raise ValueError("give either workload (one job) or jobs (several), not both")
        jobs = data["jobs"]
        if not isinstance(jobs, list) or not jobs:
            raise ValueError("jobs must be a non-empty list of {name, gpus, workload}")
        iterations = [j.get("workload", {}).get("iterations", 3) for j in jobs
                      if isinstance(j, dict) and isinstance(j.get("workload"), dict)]
        return {**data, "workload": {"kind": "jobs", "iterations": max(iterations, default=3)}}

    def job_gpus(self) -> list[tuple[Job, list[int]]]:
        """Each job with its host indices: a count takes the lowest hosts the jobs before it left."""
        taken: set[int] = set()
        out = []
        for job in self.jobs or []:
            if isinstance(job.gpus, int):
                free = [h for h in range(self.fabric.hosts) if h not in taken]
                gpus = free[:job.gpus]
            else:
                gpus = list(job.gpus)
            taken |= set(gpus)
            out.append((job, gpus))
        return out

    def warmups(self) -> int:
        """Unmeasured iterations before the measured ones (emulation.warmup_iterations, resolved)."""
        if self.emulation.warmup_iterations is not None:
            return self.emulation.warmup_iterations
        kinds = [job.workload.kind for job in self.jobs or []] or [self.workload.kind]
        return 1 if "model" in kinds else 2

    def loses_packets(self) -> bool:
        """Whether packets are lost on purpose, by the fabric or by an injected fault."""
        return self.fabric.loses_packets() or any(fault.loss_frac for fault in self.faults)

    def _jobs_fit(self) -> None:
        if self.workload.kind == "jobs" and not self.jobs:
            raise ValueError("workload kind jobs is written as a top-level jobs: list")
        if self.job_sharing == "partitioned" and not self.jobs:
            raise ValueError("job_sharing: partitioned shares a fabric among jobs: write the workload as jobs: "
                             "or leave job_sharing out")
        if self.jobs is None:
            return
        names = [job.name for job in self.jobs]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"jobs: two jobs are named {twice!r}; name each job once")
        owner: dict[int, str] = {}
        for job in self.jobs:
            if isinstance(job.gpus, int):
                left = self.fabric.hosts - len(owner)
                if job.gpus > left:
                    raise ValueError(f"jobs: job {job.name!r} asks for {job.gpus} GPUs but only {left} of "
                                     f"fabric.hosts ({self.fabric.hosts}) are left by the jobs before it")
                gpus = [h for h in range(self.fabric.hosts) if h not in owner][:job.gpus]
            else:
                gpus = job.gpus
                if not gpus or len(set(gpus)) != len(gpus) or any(not 0 <= g < self.fabric.hosts for g in gpus):
                    raise ValueError(f"jobs: job {job.name!r} must list distinct hosts in "
                                     f"0..{self.fabric.hosts - 1} (got {gpus})")
            for g in gpus:
                if g in owner:
                    raise ValueError(f"jobs: jobs {owner[g]!r} and {job.name!r} both use GPU {g}; "
                                     f"give each GPU to one job")
                owner[g] = job.name
            model = job.workload.model
            if job.workload.kind == "model" and model is not None and model.mp * model.dp != len(gpus):
                raise ValueError(f"jobs: job {job.name!r}: model mp×dp = {model.mp * model.dp} must equal its "
                                 f"{len(gpus)} GPUs")

    @model_validator(mode="after")
    def _sizes_agree(self) -> "ScenarioOf[F]":
        self._jobs_fit()
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
            node = self.fabric.spec.aggregation_node
            if fault.kind == "node_restart" and not node:
                raise ValueError(f"faults[{index}]: node_restart needs an aggregation node (fabric.kind ina)")
            if fault.kind == "controller_restart" and node:
                raise ValueError(f"faults[{index}]: an ina fabric has no controller to restart")
        return self


# What the pure layers and the emulation take: a scenario with any kind's section.
Scenario = ScenarioOf[FabricSection]

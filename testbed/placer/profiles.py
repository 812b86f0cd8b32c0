"""Device profiles (as data) and user-supplied op profiles: how long each op takes per sample."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from testbed.core.errors import InputError
from testbed.placer.zoo import BYTES_PER_ELEMENT, ModelGraph, Op, _Builder

LAUNCH_US = 1.0  # kernel launch latency per sub-op (SiP-ML §4.2)
MIN_OP_US = 1.0  # shortest op a GPU runs


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    matmul_flops: float  # achieved (not peak) fp16 tensor throughput, FLOP/s
    memory_bytes_per_s: float  # achieved memory bandwidth for memory-bound ops
    memory_bytes: float  # device memory
    source: str


# Achieved throughput is ~40-50% of the datasheet peak on large matmuls; memory-bound ops ~70%.
DEVICES = {
    "v100": DeviceProfile("v100", 0.45 * 125e12, 0.7 * 900e9, 32e9, "NVIDIA V100 SXM2 32 GB datasheet"),
    "a100": DeviceProfile("a100", 0.45 * 312e12, 0.7 * 2039e9, 80e9, "NVIDIA A100 SXM4 80 GB datasheet"),
    "h100": DeviceProfile("h100", 0.45 * 989e12, 0.7 * 3350e9, 80e9, "NVIDIA H100 SXM5 80 GB datasheet"),
}
COMPUTE_BOUND = frozenset({"conv", "linear", "attention"})


def device(name: str) -> DeviceProfile:
    try:
        return DEVICES[name]
    except KeyError:
        raise InputError(f"unknown device profile '{name}'; known: {', '.join(sorted(DEVICES))}") from None


def _per_sample(op: Op) -> float:
    """A user profile's op time per sample (set for every op once its profile is read)."""
    assert op.compute_us_per_sample is not None
    return op.compute_us_per_sample


def op_us_per_sample(op: Op, profile: DeviceProfile) -> float:
    """Compute time of one sample through `op` on `profile`, in µs (launch latency excluded)."""
    if op.compute_us_per_sample is not None:
        return op.compute_us_per_sample
    if op.kind in COMPUTE_BOUND:
        seconds = op.flops_per_sample / profile.matmul_flops
    else:  # read the input, write the output
        seconds = 2 * op.out_bytes_per_sample / profile.memory_bytes_per_s
    return seconds * 1e6


class _ProfiledOp(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    kind: str = "linear"
    compute_us_per_sample: float | None = Field(default=None, ge=0)
    compute_us_per_batch: float | None = Field(default=None, ge=0)
    output_bytes: float = Field(ge=0, description="per sample")
    parameter_bytes: float = Field(default=0, ge=0)
    deps: list[str] = []
    max_parts: int = Field(default=1 << 30, ge=1)


class _Profile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    batch: int = Field(default=1, ge=1, description="batch size compute_us_per_batch was measured at")
    ops: list[_ProfiledOp] = Field(min_length=1)


def load_user_profile(path: str | Path) -> ModelGraph:
    """A forward op graph measured on the user's hardware (YAML or JSON); backward is derived."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such profile file; check the path")
    try:
        data = yaml.safe_load(path.read_text()) if path.suffix in (".yaml", ".yml") else json.loads(path.read_text())
        profile = _Profile.model_validate(data)
    except (ValueError, yaml.YAMLError, ValidationError) as error:
        first = error.errors()[0] if isinstance(error, ValidationError) else None
        where = ".".join(str(p) for p in first["loc"]) if first else ""
        why = first["msg"] if first else str(error).split("\n")[0]
        raise InputError(f"{path}: invalid profile{' at ' + where if where else ''}: {why}") from None
    seen: set[str] = set()
    builder = _Builder()
    for entry in profile.ops:
        missing = [d for d in entry.deps if d not in seen]
        if missing:
            raise InputError(f"{path}: op '{entry.name}' depends on '{missing[0]}', which is not defined before it")
        if entry.name in seen:
            raise InputError(f"{path}: op '{entry.name}' is defined twice")
        if (entry.compute_us_per_sample is None) == (entry.compute_us_per_batch is None):
            raise InputError(f"{path}: op '{entry.name}' needs exactly one of compute_us_per_sample "
                             "or compute_us_per_batch")
        seen.add(entry.name)
        builder.add(entry.name, entry.kind, 0.0, entry.output_bytes / BYTES_PER_ELEMENT,
                    entry.parameter_bytes / BYTES_PER_ELEMENT, tuple(entry.deps), entry.max_parts)
        per_sample = entry.compute_us_per_sample
        if per_sample is None:
            assert entry.compute_us_per_batch is not None  # the profile's validation requires one of them
            per_sample = entry.compute_us_per_batch / profile.batch
        builder.ops[-1] = replace(builder.ops[-1], compute_us_per_sample=per_sample)
    graph = builder.build(profile.name, (f"user profile {path.name}",))
    # Backward ops of measured forward ops: twice the time for ops with parameters, else the same.
    ops = tuple(
        replace(op, compute_us_per_sample=(2.0 if op.parametric else 1.0)
                * _per_sample(graph.op(op.name[:-4]))) if op.backward else op
        for op in graph.ops
    )
    return ModelGraph(graph.name, ops, graph.notes)

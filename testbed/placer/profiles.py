"""Device profiles (as data) and user-supplied op profiles: how long each op takes per sample."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from testbed.model.errors import InputError
from testbed.model.input_files import TRACE_BYTES, read_text
from testbed.model.limits import MAX_COLLECTIVE_BYTES, MAX_COMPUTE_US
from testbed.placer.zoo import BYTES_PER_ELEMENT, ModelGraph, Op, _Builder

LAUNCH_US = 1.0  # kernel launch latency per sub-op (SiP-ML §4.2)
MIN_OP_US = 1.0  # shortest op a GPU runs


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    matmul_flops: float  # achieved (not peak) fp16 tensor throughput on large GEMMs, FLOP/s
    memory_bytes_per_s: float  # achieved memory bandwidth for memory-bound ops
    memory_bytes: float  # device memory
    source: str
    sms: int = 80  # streaming multiprocessors: a GEMM's output tiles run this many at a time
    # "waves": a GEMM too small to fill the GPU gets a share of matmul_flops (gemm_efficiency);
    # "constant": every op gets all of it, however small its piece;
    # "paper": SiP-ML §4.2's model: an op's time at the local batch from its curve over the sample
    # dimension (waves at the whole op's shape), divided linearly by a split along any other dimension.
    efficiency: str = "constant"


# Achieved throughput is ~40-50% of the datasheet peak on large matmuls; memory-bound ops ~70%.
DEVICES = {
    "v100": DeviceProfile("v100", 0.45 * 125e12, 0.7 * 900e9, 32e9, "NVIDIA V100 SXM2 32 GB datasheet", sms=80),
    "a100": DeviceProfile("a100", 0.45 * 312e12, 0.7 * 2039e9, 80e9, "NVIDIA A100 SXM4 80 GB datasheet", sms=108),
    "h100": DeviceProfile("h100", 0.45 * 989e12, 0.7 * 3350e9, 80e9, "NVIDIA H100 SXM5 80 GB datasheet", sms=132),
}
EFFICIENCY_MODELS = ("constant", "waves", "paper")
COMPUTE_BOUND = frozenset({"conv", "linear", "attention"})
GEMM_KINDS = frozenset({"conv", "linear"})  # one GEMM whose output is positions × channels
# Output tile shapes cuBLAS chooses among for fp16 GEMMs (NVIDIA, Matrix Multiplication Background
# User's Guide, DU-09799-001, §2.3 "Typical Tile Dimensions In cuBLAS And Performance").
GEMM_TILES = ((256, 128), (128, 256), (128, 128), (256, 64), (64, 256), (128, 64), (64, 128), (64, 64))


def device(name: str, efficiency: str = "constant") -> DeviceProfile:
    if efficiency not in EFFICIENCY_MODELS:
        raise InputError(f"unknown GPU efficiency model '{efficiency}'; known: {', '.join(EFFICIENCY_MODELS)}")
    try:
        return replace(DEVICES[name], efficiency=efficiency)
    except KeyError:
        raise InputError(f"unknown device profile '{name}'; known: {', '.join(sorted(DEVICES))}") from None


def gemm_efficiency(rows: float, columns: float, sms: int) -> float:
    """Share of the large-GEMM throughput a GEMM whose output is rows × columns gets (NVIDIA, Matrix
    Multiplication Background User's Guide, §3 "Dimension Quantization Effects"): its output is cut
    into tiles that run `sms` at a time, so partial tiles and a last partial wave leave part of the
    GPU idle. The best of cuBLAS's tile shapes, each taken at the large-GEMM rate: smaller tiles
    are slower per FLOP in practice, so small GEMMs lose at least this much."""
    rows, columns = max(1.0, rows), max(1.0, columns)
    best = 0.0
    for tile_rows, tile_columns in GEMM_TILES:
        tiles = math.ceil(rows / tile_rows) * math.ceil(columns / tile_columns)
        waves = math.ceil(tiles / sms)
        best = max(best, rows * columns / (waves * sms * tile_rows * tile_columns))
    return best


def gemm_part_shape(op: Op, local_batch: int, split: str, parts: int) -> tuple[float, float] | None:
    """(rows, columns) of one part's output GEMM: positions × samples by output channels (the
    zoo's `max_parts` of a conv or linear op is its output channels), cut as the split cuts it;
    None for an op that is not one GEMM or whose time was measured."""
    if op.kind not in GEMM_KINDS or op.compute_us_per_sample is not None:
        return None
    channels = float(min(op.max_parts, op.out_bytes_per_sample / BYTES_PER_ELEMENT))
    rows = op.out_bytes_per_sample / BYTES_PER_ELEMENT / channels * local_batch
    if parts > 1 and split == "column":
        channels /= parts
    elif parts > 1 and split in ("sample", "height"):
        rows /= parts
    return rows, channels  # a row split cuts the reduction dimension: the output keeps its shape


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


def op_total_us(op: Op, profile: DeviceProfile, batch: float) -> float:
    """Compute time of `batch` samples through `op`, in µs: from its measured curve over the batch
    where the profile has one (linear between its points; beyond them, the nearest point's time per
    sample), else `batch` times op_us_per_sample."""
    curve = op.compute_us_by_batch
    if not curve:
        return batch * op_us_per_sample(op, profile)
    if batch <= curve[0][0]:
        return curve[0][1] * batch / curve[0][0]
    for (b0, t0), (b1, t1) in zip(curve, curve[1:]):
        if batch <= b1:
            return t0 + (t1 - t0) * (batch - b0) / (b1 - b0)
    return curve[-1][1] * batch / curve[-1][0]


# The op kinds the placer's rules know (how an op splits, whether it has weights, what follows it).
OpKind = Literal["conv", "linear", "attention", "embedding", "norm", "pool", "elementwise", "loss"]


class _ProfiledOp(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    kind: OpKind = "linear"
    compute_us_per_sample: float | None = Field(default=None, ge=0, le=MAX_COMPUTE_US)
    compute_us_per_batch: float | None = Field(default=None, ge=0, le=MAX_COMPUTE_US)
    # µs at each measured batch size, e.g. {1: 40, 8: 60, 64: 310}: the op's curve over the batch
    compute_us_by_batch: dict[int, float] | None = None
    output_bytes: float = Field(ge=0, le=MAX_COLLECTIVE_BYTES, description="per sample")
    parameter_bytes: float = Field(default=0, ge=0, le=MAX_COLLECTIVE_BYTES)
    deps: list[str] = []
    max_parts: int = Field(default=1 << 30, ge=1)


class _Profile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    batch: int = Field(default=1, ge=1, description="batch size compute_us_per_batch was measured at")
    ops: list[_ProfiledOp] = Field(min_length=1)


def _backward_timed(op: Op, forward: Op) -> Op:
    factor = 2.0 if op.parametric else 1.0
    return replace(op, compute_us_per_sample=factor * _per_sample(forward),
                   compute_us_by_batch=tuple((b, factor * t) for b, t in forward.compute_us_by_batch))


def load_user_profile(path: str | Path) -> ModelGraph:
    """A forward op graph measured on the user's hardware (YAML or JSON); backward is derived."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such profile file; check the path")
    try:
        # libyaml's parser where PyYAML has it: the pure-Python one took over 30 s for 20,000 ops
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        text = read_text(path, "an op profile (YAML or JSON)", TRACE_BYTES)
        data = yaml.load(text, Loader=loader) if path.suffix in (".yaml", ".yml") else json.loads(text)  # noqa: S506
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
        timings = (entry.compute_us_per_sample, entry.compute_us_per_batch, entry.compute_us_by_batch)
        if sum(t is not None for t in timings) != 1:
            raise InputError(f"{path}: op '{entry.name}' needs exactly one of compute_us_per_sample, "
                             "compute_us_per_batch or compute_us_by_batch")
        curve = tuple(sorted((float(b), float(t)) for b, t in (entry.compute_us_by_batch or {}).items()))
        if entry.compute_us_by_batch is not None and (not curve or curve[0][0] < 1 or min(t for _, t in curve) < 0):
            raise InputError(f"{path}: op '{entry.name}': compute_us_by_batch needs batch sizes of at least 1 "
                             "and times of at least 0, e.g. {1: 40, 8: 60}")
        seen.add(entry.name)
        builder.add(entry.name, entry.kind, 0.0, entry.output_bytes / BYTES_PER_ELEMENT,
                    entry.parameter_bytes / BYTES_PER_ELEMENT, tuple(entry.deps), entry.max_parts)
        per_sample = entry.compute_us_per_sample
        if curve:
            per_sample = curve[-1][1] / curve[-1][0]
        elif per_sample is None:
            assert entry.compute_us_per_batch is not None  # the profile's validation requires one of them
            per_sample = entry.compute_us_per_batch / profile.batch
        builder.ops[-1] = replace(builder.ops[-1], compute_us_per_sample=per_sample, compute_us_by_batch=curve)
    graph = builder.build(profile.name, (f"user profile {path.name}",))
    # Backward ops of measured forward ops: twice the time for ops with parameters, else the same.
    ops = tuple(_backward_timed(op, graph.op(op.name[:-4])) if op.backward else op for op in graph.ops)
    return ModelGraph(graph.name, ops, graph.notes)

"""Balance (SiP-ML §3.2 i): split each op into sub-ops of about τ, at most k parts, choosing the split
dimension per op type, and derive the communication each split implies.

Splits (Megatron-style for weights, so that most edges are one-to-one):
- column: a weighted op cut by output channel; weights partitioned; needs the whole input.
- row:    a weighted op after a channel-sliced input, cut by input channel; needs only its slice;
          outputs full-size partial sums that consumers must add up.
- follow: a weight-free op (attention heads, activation) kept on its producer's channel slices.
- sample: cut by sample/token (norms, residual adds, the loss); needs only its slice.
"""

from __future__ import annotations

from dataclasses import dataclass

from testbed.placer.profiles import (
    LAUNCH_US,
    MIN_OP_US,
    DeviceProfile,
    gemm_efficiency,
    gemm_part_shape,
    op_us_per_sample,
)
from testbed.placer.zoo import ModelGraph, Op

TAU_US = 10.0
FOLLOWING_KINDS = frozenset({"attention", "elementwise", "pool"})
# What the output of an op looks like, by split, forward and backward.
FORWARD_LAYOUT = {"sample": "sample", "column": "channel", "row": "partial", "follow": "channel"}
BACKWARD_LAYOUT = {"sample": "sample", "column": "partial", "row": "channel", "follow": "channel"}
# What a part needs of its inputs, by split.
FORWARD_NEED = {"sample": "sample", "column": "whole", "row": "channel", "follow": "channel"}
BACKWARD_NEED = {"sample": "sample", "column": "channel", "row": "whole", "follow": "channel"}


@dataclass(frozen=True)
class BalancedOp:
    index: int
    op: Op
    parts: int
    split: str
    part_us: float  # duration of one sub-op, launch latency included
    out_bytes: float  # whole op output for the local batch
    parents: tuple[int, ...]
    self_parent: int | None  # the forward op of a backward op: its activations stay with its parts

    @property
    def layout(self) -> str:
        return (BACKWARD_LAYOUT if self.op.backward else FORWARD_LAYOUT)[self.split] if self.parts > 1 else "whole"

    @property
    def need(self) -> str:
        return (BACKWARD_NEED if self.op.backward else FORWARD_NEED)[self.split] if self.parts > 1 else "whole"

    @property
    def part_param_bytes(self) -> float:
        return self.op.param_bytes / self.parts if self.split in ("column", "row") else self.op.param_bytes


def _forward_split(op: Op, parents: list[BalancedOp]) -> tuple[str, int | None]:
    """(split, forced parts): aligned splits take their producer's part count."""
    sliced = [p for p in parents if p.layout == "channel"]
    if op.parametric:
        if len(parents) == 1 and sliced:
            return "row", sliced[0].parts
        return "column", None
    if op.kind in FOLLOWING_KINDS and len(parents) == 1 and sliced:
        return "follow", sliced[0].parts
    return "sample", None


def balance(graph: ModelGraph, profile: DeviceProfile, local_batch: int, k: int, tau_us: float = TAU_US,
            max_parts: int | None = None) -> list[BalancedOp]:
    index = {op.name: i for i, op in enumerate(graph.ops)}
    cap = max(1, min(k, max_parts or k))
    balanced: list[BalancedOp] = []
    for i, op in enumerate(graph.ops):
        total_us = local_batch * op_us_per_sample(op, profile)
        parents = tuple(index[d] for d in op.deps)
        self_parent = index[op.name[:-4]] if op.backward else None
        if self_parent is not None:
            forward = balanced[self_parent]
            split, parts = forward.split, forward.parts
        else:
            split, forced = _forward_split(op, [balanced[p] for p in parents])
            parts = forced or max(1, min(cap, op.max_parts, round(total_us / tau_us)))
        part_us = max(MIN_OP_US, total_us / parts / _efficiency(op, balanced, self_parent, profile, local_batch,
                                                                split, parts)) + LAUNCH_US
        balanced.append(BalancedOp(i, op, parts, split, part_us, op.out_bytes_per_sample * local_batch, parents,
                                   self_parent))
    return balanced


def _efficiency(op: Op, balanced: list[BalancedOp], self_parent: int | None, profile: DeviceProfile,
                local_batch: int, split: str, parts: int) -> float:
    """Share of the device's GEMM throughput one part of `op` gets. A backward op is taken at its
    forward op's output shape, an approximation: its data-gradient GEMM has the input's shape and
    its weight-gradient GEMM the weights'."""
    if profile.efficiency != "waves":
        return 1.0
    shape = gemm_part_shape(balanced[self_parent].op if self_parent is not None else op, local_batch, split, parts)
    return gemm_efficiency(*shape, profile.sms) if shape else 1.0


def _overlap(a: int, na: int, b: int, nb: int) -> float:
    lo = max(a / na, b / nb)
    hi = min((a + 1) / na, (b + 1) / nb)
    return max(0.0, hi - lo)


def inputs_of(parent: BalancedOp, child: BalancedOp, part: int) -> list[tuple[int, float]]:
    """(parent part, bytes) that sub-op `part` of `child` needs from `parent`."""
    out, n = parent.out_bytes, parent.parts
    if child.self_parent == parent.index:
        # Backward reuses the forward part's activations, kept where that part ran.
        return [(p, out / n) for p in range(n) if _overlap(p, n, part, child.parts) > 0]
    layout, need = parent.layout, child.need
    if layout == "whole":
        share = out if need == "whole" else out / child.parts
        return [(0, share)]
    if layout == "partial":  # every part holds a full-size partial sum
        share = out if need == "whole" else out / child.parts
        return [(p, share) for p in range(n)]
    if need == "whole":
        return [(p, out / n) for p in range(n)]
    if need == layout:  # aligned slices: one-to-one when the part counts match
        return [(p, f * out) for p in range(n) if (f := _overlap(p, n, part, child.parts)) > 0]
    return [(p, out / (n * child.parts)) for p in range(n)]  # a transpose: a piece from everyone

"""Balance (SiP-ML §3.2 i): split each op into sub-ops of about τ, at most k parts, choosing the split
dimension per op type, and derive the communication each split implies.

Splits (Megatron-style for weights, so that most edges are one-to-one):
- column: a weighted op cut by output channel; weights partitioned; needs the whole input.
- row:    a weighted op after a channel-sliced input, cut by input channel; needs only its slice;
          outputs full-size partial sums that consumers must add up.
- follow: a weight-free op (attention heads, activation) kept on its producer's channel slices.
- sample: cut by sample/token (norms, residual adds, the loss); needs only its slice.
- height: a convolution cut by output rows (a spatial split); weights replicated; needs its rows of
          the input plus a halo of kernel // 2 rows from each neighbour, forward and backward. Pools
          and adds after height-sliced producers follow them. The parts' weight gradients are summed
          by a `.wgrad` sub-op per part after the backward: each part gathers its 1/p of the
          gradient from every part (reduce-scatter), hands that shard to the DP all-reduce, and the
          summed shards are gathered back (all-gather), whose bytes are charged with the
          reduce-scatter's, ahead of the DP all-reduce rather than after it.
Without pairing (split_pairing: false) no op is cut by row: every weighted op is cut by output
channel, so each part gathers the whole input (SiP-ML §3.2's broadcast) and its backward sums the
parts' partial input gradients.
A weighted op with rows is cut by height or by channel, whichever moves fewer bytes: a channel split
moves activations (its input gathered, or its output's partial sums), a height split its weight
gradients and the halos.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from testbed.placer.profiles import (
    LAUNCH_US,
    MIN_OP_US,
    DeviceProfile,
    gemm_efficiency,
    gemm_part_shape,
    op_total_us,
)
from testbed.placer.zoo import ModelGraph, Op

TAU_US = 10.0
FOLLOWING_KINDS = frozenset({"attention", "elementwise", "pool"})
GRADIENT_SUM = "gradsum"  # the kind of a height-split op's `.wgrad` sub-ops
# What the output of an op looks like, by split, forward and backward.
FORWARD_LAYOUT = {"sample": "sample", "column": "channel", "row": "partial", "follow": "channel", "height": "height",
                  "shard": "shard"}
BACKWARD_LAYOUT = {"sample": "sample", "column": "partial", "row": "channel", "follow": "channel", "height": "height",
                   "shard": "shard"}
# What a part needs of its inputs, by split.
FORWARD_NEED = {"sample": "sample", "column": "whole", "row": "channel", "follow": "channel", "height": "height",
                "shard": "shard"}
BACKWARD_NEED = {"sample": "sample", "column": "channel", "row": "whole", "follow": "channel", "height": "height",
                 "shard": "shard"}


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
        return self.op.param_bytes / self.parts if self.split in ("column", "row", "shard") else self.op.param_bytes

    def largest_message_bytes(self, parent: "BalancedOp") -> float | None:
        """The most one part of `parent` sends to one GPU for this op: the part's output, which the
        parts of this op placed together share (None: no cap, a `.wgrad` sub-op receives weight-
        gradient pieces, not `parent`'s output)."""
        if self.op.kind == GRADIENT_SUM:
            return None
        return parent.out_bytes if parent.layout == "partial" else parent.out_bytes / parent.parts

    @property
    def gradient_bytes(self) -> float:
        """The weight gradient one part hands to the DP all-reduce (backward sub-ops only): a height
        split's parts hand theirs to the `.wgrad` sub-ops, which hold 1/p of it each."""
        if not self.op.backward or (self.split == "height" and self.parts > 1 and self.op.kind != GRADIENT_SUM):
            return 0.0
        return self.part_param_bytes


def _forward_split(op: Op, parents: list[BalancedOp], local_batch: int, spatial: bool,
                   parts: Callable[[int], int], pairing: bool = True) -> tuple[str, int | None]:
    """(split, forced parts): aligned splits take their producer's part count; `parts(limit)` is
    how many parts τ asks for, at most `limit`; without `pairing` no op is cut by input channel."""
    sliced = [p for p in parents if p.layout == "channel"]
    rows = [p for p in parents if p.layout == "height"]
    if op.parametric:
        if pairing and len(parents) == 1 and sliced:
            return "row", sliced[0].parts
        if spatial and op.rows > 1 and _height_is_cheaper(op, parents, local_batch, parts(op.rows),
                                                          parts(op.max_parts)):
            aligned = rows[0].parts if rows and len(rows) == len(parents) else None
            return "height", aligned if aligned is not None and aligned <= op.rows else None
        return "column", None
    if op.kind in FOLLOWING_KINDS and len(parents) == 1 and sliced:
        return "follow", sliced[0].parts
    if (op.kind in FOLLOWING_KINDS and rows and len(rows) == len(parents)
            and len({p.parts for p in rows}) == 1 and op.rows >= rows[0].parts):
        return "height", rows[0].parts
    return "sample", None


def _height_is_cheaper(op: Op, parents: list[BalancedOp], local_batch: int, height_parts: int,
                       channel_parts: int) -> bool:
    """Whether cutting `op` by rows moves fewer bytes than cutting it by channel, at no less
    parallelism. Per iteration, forward and backward: a channel split gathers its input or sums its
    output's partial sums, (p − 1)·(input + output) bytes over a column/row pair; a height split
    exchanges halos, 4(p − 1)·halo·(input bytes per row), sums its weight gradient over the parts,
    2(p − 1)·W, and first gathers its rows when its input is not already cut by rows."""
    if height_parts < max(2, channel_parts):
        return False
    in_bytes = sum(p.out_bytes for p in parents)
    out_bytes = op.out_bytes_per_sample * local_batch
    channel = (channel_parts - 1) * (in_bytes + out_bytes)
    in_rows = max((p.op.rows for p in parents), default=0) or op.rows
    halo = 4 * (height_parts - 1) * op.halo_rows * in_bytes / in_rows
    regather = sum(p.out_bytes for p in parents if p.layout != "height" or p.parts != height_parts)
    height = halo + 2 * (height_parts - 1) * op.param_bytes + regather
    return height < channel


def balance(graph: ModelGraph, profile: DeviceProfile, local_batch: int, k: int, tau_us: float = TAU_US,
            max_parts: int | None = None, spatial: bool = True, pairing: bool = True) -> list[BalancedOp]:
    """The graph's ops as sub-ops, in topological order; `pairing`: a weighted op after a channel-cut
    op is cut by input channel (else by output channel, gathering its input); `spatial`: convolutions
    may be cut by rows (each height-split op's backward is then followed by its `.wgrad` sub-ops, so indices here
    differ from the graph's)."""
    index: dict[str, int] = {}
    cap = max(1, min(k, max_parts or k))
    balanced: list[BalancedOp] = []
    for op in graph.ops:
        i = index[op.name] = len(balanced)
        total_us = op_total_us(op, profile, local_batch)
        parents = tuple(index[d] for d in op.deps)
        self_parent = index[op.name[:-4]] if op.backward else None
        if self_parent is not None:
            forward = balanced[self_parent]
            split, parts = forward.split, forward.parts
        else:
            def wanted(limit: int, total_us: float = total_us) -> int:
                return max(1, min(cap, limit, round(total_us / tau_us)))
            split, forced = _forward_split(op, [balanced[p] for p in parents], local_batch, spatial, wanted,
                                           pairing)
            parts = forced or wanted(op.rows if split == "height" else op.max_parts)
        # A measured curve over the batch times a sample split's part at its own batch; a split along
        # a dimension it has no profile for divides the time linearly (SiP-ML §4.2).
        part_total_us = (op_total_us(op, profile, local_batch / parts) if op.compute_us_by_batch and split == "sample"
                         else total_us / parts)
        part_us = max(MIN_OP_US, part_total_us / _efficiency(op, balanced, self_parent, profile, local_batch,
                                                             split, parts)) + LAUNCH_US
        balanced.append(BalancedOp(i, op, parts, split, part_us, op.out_bytes_per_sample * local_batch, parents,
                                   self_parent))
        if self_parent is not None and split == "height" and parts > 1 and op.param_bytes > 0:
            balanced.append(_gradient_sum(balanced[-1], self_parent, profile))
    return balanced


def _gradient_sum(backward: BalancedOp, forward: int, profile: DeviceProfile) -> BalancedOp:
    """The `.wgrad` sub-ops of a height-split op: part c adds up the p parts' pieces of shard c of
    the weight gradient (reading p pieces and writing one, at the device's memory bandwidth); each
    runs where the op's part c did."""
    name = backward.op.name[:-4] + ".wgrad"
    param_bytes = backward.op.param_bytes
    op = Op(name, GRADIENT_SUM, 0.0, param_bytes, param_bytes, (backward.op.name,), backward=True)
    shard_us = (backward.parts + 1) * param_bytes / backward.parts / profile.memory_bytes_per_s * 1e6
    return BalancedOp(backward.index + 1, op, backward.parts, "shard", max(MIN_OP_US, shard_us) + LAUNCH_US,
                      param_bytes, (backward.index,), forward)


def _efficiency(op: Op, balanced: list[BalancedOp], self_parent: int | None, profile: DeviceProfile,
                local_batch: int, split: str, parts: int) -> float:
    """Share of the device's GEMM throughput one part of `op` gets. A backward op is taken at its
    forward op's output shape, an approximation: its data-gradient GEMM has the input's shape and
    its weight-gradient GEMM the weights'. "paper" (SiP-ML §4.2): the op's curve over the sample
    dimension at the group's local batch (waves at the whole op's shape), and a split along any
    other dimension, which has no profile, divides that time linearly."""
    if profile.efficiency == "constant":
        return 1.0
    if profile.efficiency == "paper" and split != "sample":
        parts = 1
    shape = gemm_part_shape(balanced[self_parent].op if self_parent is not None else op, local_batch, split, parts)
    return gemm_efficiency(*shape, profile.sms) if shape else 1.0


def _overlap(a: int, na: int, b: int, nb: int, margin: float = 0.0) -> float:
    """Share of the whole that slice a of na and slice b of nb, widened by `margin` on each side
    and clipped to the whole, have in common."""
    lo = max(a / na, b / nb - margin, 0.0)
    hi = min((a + 1) / na, (b + 1) / nb + margin, 1.0)
    return max(0.0, hi - lo)


def inputs_of(parent: BalancedOp, child: BalancedOp, part: int) -> list[tuple[int, float]]:
    """(parent part, bytes) that sub-op `part` of `child` needs from `parent`."""
    out, n = parent.out_bytes, parent.parts
    if child.self_parent == parent.index:
        # Backward reuses the forward part's activations, kept where that part ran.
        return [(p, out / n) for p in range(n) if _overlap(p, n, part, child.parts) > 0]
    if child.op.kind == GRADIENT_SUM:
        # Piece `part` of every part's weight gradient, and the summed shard each part sends back.
        return [(p, 2 * child.op.param_bytes / child.parts) for p in range(n)]
    layout, need = parent.layout, child.need
    if layout == need == "height" and child.op.halo_rows and parent.op.rows:
        # Rows one-to-one, plus the halo from the neighbouring parts.
        margin = child.op.halo_rows / parent.op.rows
        return [(p, f * out) for p in range(n) if (f := _overlap(p, n, part, child.parts, margin)) > 0]
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

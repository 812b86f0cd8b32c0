"""Gradient buckets: each GPU's DP all-reduce cut into buckets that start as the backward sub-ops
producing their gradients finish, as data-parallel frameworks overlap it with backward compute
(PyTorch DDP fills 25 MB buckets in the order gradients become ready). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from testbed.placer.place import MpPlacement

DEFAULT_BUCKET_BYTES = 25_000_000  # PyTorch DistributedDataParallel's bucket_cap_mb


@dataclass(frozen=True)
class Bucket:
    subops: tuple[tuple[int, int], ...]  # the backward (op, part)s whose gradients it holds, in run order
    bytes: float


def gradient_buckets(placement: MpPlacement, bucket_bytes: float,
                     scale: float = 1.0) -> tuple[tuple[Bucket, ...], ...]:
    """Per MP-group GPU, its buckets in the order they fill: a bucket closes once it holds at least
    `bucket_bytes` (0: one bucket of every gradient, after the GPU's last backward sub-op). Each
    sub-op's gradient is `scale` times its parameter bytes (2 for fp32 gradients of fp16 weights)."""
    ops = placement.ops
    per_gpu: list[list[tuple[float, tuple[int, int], float]]] = [[] for _ in range(placement.k)]
    for j, op in enumerate(ops):
        if op.gradient_bytes <= 0:
            continue
        for c in range(op.parts):
            per_gpu[placement.gpu[j][c]].append((placement.end_us[j][c], (j, c), op.gradient_bytes * scale))
    buckets: list[tuple[Bucket, ...]] = []
    for produced in per_gpu:
        mine: list[Bucket] = []
        held: list[tuple[int, int]] = []
        size = 0.0
        for _, subop, grad_bytes in sorted(produced):
            held.append(subop)
            size += grad_bytes
            if bucket_bytes > 0 and size >= bucket_bytes:
                mine.append(Bucket(tuple(held), size))
                held, size = [], 0.0
        if held:
            mine.append(Bucket(tuple(held), size))
        buckets.append(tuple(mine))
    return tuple(buckets)


# Fusions a DP framework may choose between (PyTorch DDP's bucket_cap_mb doubled, and everything in
# one bucket): a fixed set, so that the best of them, each no slower on a faster fabric, is too.
FUSION_DOUBLINGS = 8  # 25 MB up to 6.4 GB, past the largest zoo model's gradient shard
ONE_BUCKET = float("inf")


def fusion_candidates_bytes() -> tuple[float, ...]:
    """Fusion thresholds to try (merge_buckets' min_bytes): none (the plan's own buckets), 25 MB·2^j
    for j = 0..FUSION_DOUBLINGS-1, and one bucket."""
    return (0.0, *(DEFAULT_BUCKET_BYTES * 2 ** j for j in range(FUSION_DOUBLINGS)), ONE_BUCKET)


def merge_buckets(buckets: tuple[Bucket, ...], min_bytes: float) -> tuple[Bucket, ...]:
    """Consecutive buckets fused until each holds at least `min_bytes` (the last may hold less)."""
    merged: list[Bucket] = []
    held: list[tuple[int, int]] = []
    size = 0.0
    for bucket in buckets:
        held += bucket.subops
        size += bucket.bytes
        if size >= min_bytes:
            merged.append(Bucket(tuple(held), size))
            held, size = [], 0.0
    if held:
        merged.append(Bucket(tuple(held), size))
    return tuple(merged)


def overlapped_finish_s(ready_and_cost_s: list[tuple[float, float]]) -> float:
    """When the last of a GPU's buckets is all-reduced: each starts once its gradients are ready
    and the bucket before it is done (one DP ring at a time), and takes its cost."""
    finish = 0.0
    for ready, cost in ready_and_cost_s:
        finish = max(finish, ready) + cost
    return finish

"""BytePS's and the classic parameter server's partition of a buffer (BytePS's load split, docs/byteps.md):
chunks hashed to summation services on GPU and CPU machines. Pure; the host agents run it
(hosts.byteps), the oracle and the schedule's traffic matrix model it."""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_CHUNK_BYTES = 4_000_000  # real-world bytes (BytePS splits tensors into chunks of at most 4 MB)
CHUNKS_PER_BUCKET = 10  # what keeps the push/sum pipeline's fill and drain under ~10% of the transfer
MIN_CHUNK_BYTES = 128_000  # below this, per-message latency and overhead outweigh finer pipelining
# Past 4 GB a bucket, chunks grow beyond MAX_CHUNK_BYTES instead of multiplying: a terabyte buffer
# would otherwise be millions of messages to plan, where a thousand a bucket pipeline as well.
MAX_CHUNKS_PER_BUCKET = 1000


class PartitionError(ValueError):
    """The GPU and CPU machine counts admit no split (e.g. BytePS with more CPU than GPU machines)."""


def service_buckets(n: int, k: int, classic: bool) -> list[int]:
    """Hash buckets per summation service: GPU machines 0..n-1 first, then CPU machines.

    BytePS: n-k buckets per GPU machine and 2(n-1) per CPU machine, out of n²+kn-2k, so each sums
    (n-k)/(n²+kn-2k)·M and 2(n-1)/(n²+kn-2k)·M. A classic PS: one bucket per CPU machine, none on
    the GPU machines."""
    if n < 1 or k < 0:
        raise PartitionError(f"need at least one GPU machine and no negative CPU machines (n={n}, k={k})")
    if classic:
        if k < 1:
            raise PartitionError("a classic parameter server needs at least one CPU machine (cpu_servers ≥ 1)")
        return [0] * n + [1] * k
    if k > n:
        raise PartitionError(f"BytePS splits load for at most as many CPU machines as GPU machines (k={k} > n={n}); "
                             f"use algorithm ps for a classic parameter server")
    if n == 1:
        return [1] + [0] * k
    return [n - k] * n + [2 * (n - 1)] * k


def chunk_count(size_bytes: float, buckets: int) -> int:
    """A multiple of the bucket count, so every bucket gets the same number of equal chunks and the
    realised split is exactly the optimal one; chunks of at most MAX_CHUNK_BYTES, and at least
    CHUNKS_PER_BUCKET per bucket while chunks stay above MIN_CHUNK_BYTES. A chunk's sum leaves only
    once every worker's copy is in, so pushes and sums overlap except while the pipeline fills and
    drains, a few chunks' time each: with n = 4, k = 2 and 100 MB, 40 chunks of 2.5 MB take 1.25×
    the optimum in the fluid model without alpha, 200 chunks 1.08×."""
    per_bucket = max(min(math.ceil(size_bytes / (buckets * MAX_CHUNK_BYTES)), MAX_CHUNKS_PER_BUCKET),
                     min(CHUNKS_PER_BUCKET, int(size_bytes // (buckets * MIN_CHUNK_BYTES))), 1)
    return buckets * per_bucket


def chunk_owners(n: int, k: int, classic: bool, chunks: int) -> list[int]:
    """Service index (0..n-1 GPU machines, n..n+k-1 CPU machines) of every chunk. Chunk c hashes to
    bucket c mod T; buckets are interleaved across services so that consecutive chunks go to
    different services and every service's pulls start early."""
    quotas = service_buckets(n, k, classic)
    order = sorted(((j + 0.5) / q, s) for s, q in enumerate(quotas) for j in range(q))
    buckets = [s for _, s in order]
    return [buckets[c % len(buckets)] for c in range(chunks)]


def push_window(owners: list[int]) -> int:
    """Chunks a worker has in flight at once: one per summation service. Consecutive chunks go to
    different services, so each service gets its share of every worker's link (services with more
    buckets come up more often), and no connection runs ahead of the others."""
    return max(1, len(set(owners)))


def transfers(n: int, k: int, classic: bool, chunks: int) -> list[tuple[int, int, int]]:
    """(chunk, sender, receiver) of every message, as node indices (GPU machines 0..n-1, then CPU
    machines): each worker's push of a chunk to its service, and the sum coming back."""
    messages = []
    for chunk, owner in enumerate(chunk_owners(n, k, classic, chunks)):
        for worker in range(n):
            if worker != owner:
                messages += [(chunk, worker, owner), (chunk, owner, worker)]
    return messages


@dataclass(frozen=True)
class Loads:
    """Bytes each node sends and receives in one all-reduce, per unit of buffer (M = 1)."""

    sent: tuple[float, ...]  # per node: GPU machines first, then CPU machines
    received: tuple[float, ...]


def node_loads(n: int, k: int, classic: bool, chunks: int) -> Loads:
    sent, received = [0.0] * (n + k), [0.0] * (n + k)
    for _, src, dst in transfers(n, k, classic, chunks):
        sent[src] += 1.0 / chunks
        received[dst] += 1.0 / chunks
    return Loads(tuple(sent), tuple(received))

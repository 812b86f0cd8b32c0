"""Collectives over a Transport with real numpy data: ring all-reduce and a ring barrier."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from hosts.transport import Transport

SEND_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class StepRecord:
    """One send/recv step of a collective, on the host's monotonic clock."""

    phase: str
    step: int
    send_peer: int
    recv_peer: int
    bytes: int
    start_s: float
    end_s: float


def _bounds(elements: int, parts: int) -> list[tuple[int, int]]:
    """Chunk edges as numpy.array_split makes them, so every rank agrees for any element count."""
    sizes = [elements // parts + (1 if i < elements % parts else 0) for i in range(parts)]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    return [(int(s), int(s + n)) for s, n in zip(starts, sizes)]


def ring_allreduce(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                   clock=time.monotonic) -> list[StepRecord]:
    """Sum `data` in place across `group` (reduce-scatter then all-gather around the ring)."""
    n = len(group)
    if n == 1:
        return []
    pos = group.index(transport.rank)
    right, left = group[(pos + 1) % n], group[(pos - 1) % n]
    bounds = _bounds(data.size, n)
    chunks = [data[a:b] for a, b in bounds]
    scratch = np.empty(max(b - a for a, b in bounds), dtype=data.dtype)
    records = []
    for phase, offset in (("reduce-scatter", 0), ("all-gather", 1)):
        for t in range(n - 1):
            step = t + offset * (n - 1)
            send_idx = (pos + offset - t) % n
            recv_idx = (pos + offset - t - 1) % n
            start = clock()
            handle = transport.send(right, tag_base + step, chunks[send_idx])
            target = chunks[recv_idx]
            if phase == "reduce-scatter":
                incoming = scratch[: target.size]
                transport.recv_into(left, tag_base + step, incoming)
                target += incoming
            else:
                transport.recv_into(left, tag_base + step, target)
            handle.wait(SEND_TIMEOUT_S)
            records.append(StepRecord(phase, step, right, left, int(chunks[send_idx].nbytes), start, clock()))
    return records


def ring_barrier(transport: Transport, group: list[int], tag: int, start_delay_s: float = 0.02,
                 clock=time.monotonic) -> float:
    """Block until every rank of `group` has arrived; returns a common start time on the shared clock.

    The first rank collects an arrival token around the ring, then circulates a start time slightly
    in the future, so that all ranks begin the next iteration at the same instant.
    """
    n = len(group)
    if n == 1:
        return clock()
    pos = group.index(transport.rank)
    right, left = group[(pos + 1) % n], group[(pos - 1) % n]
    token = np.zeros(1, dtype=np.float64)
    if pos == 0:
        transport.send(right, tag, token).wait(SEND_TIMEOUT_S)
        transport.recv_into(left, tag, token)
        token[0] = clock() + start_delay_s + 1e-3 * n
        transport.send(right, tag + 1, token).wait(SEND_TIMEOUT_S)
        transport.recv_into(left, tag + 1, token)
    else:
        transport.recv_into(left, tag, token)
        transport.send(right, tag, token).wait(SEND_TIMEOUT_S)
        transport.recv_into(left, tag + 1, token)
        transport.send(right, tag + 1, token).wait(SEND_TIMEOUT_S)
    return float(token[0])

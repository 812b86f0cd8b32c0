"""Each collective of a schedule step, end to end: its input buffer, the algorithm that runs it, and
the result a rank must end with (what the runner checks against numpy)."""

from __future__ import annotations

import numpy as np

from hosts import byteps
from hosts import collectives as c
from hosts.data import expected_sum, gradient
from hosts.transport import Transport
from testbed.shared.collective_plans import (  # noqa: F401 (what the agents run, shared with the oracle)
    ALGORITHMS,
    SERVICE_ALGORITHMS,
    chunk_bounds,
    elements_for,
    supported,
)


def make_input(op: str, seed: int, iteration: int, pos: int, ranks: int, elements: int) -> np.ndarray:
    data = gradient(seed, iteration, pos, elements)
    if op in ("allgather", "gather"):  # a rank contributes its own chunk; the rest is filled by the others
        own = chunk_bounds(elements, ranks)[pos]
        mine = np.zeros(elements, dtype=np.float32)
        mine[own[0]:own[1]] = data[own[0]:own[1]]
        return mine
    return data


SEPARATE_OUTPUT = ("alltoall", "sendrecv")  # ops that receive into a buffer of their own


def output_buffer(op: str, data: np.ndarray | None) -> np.ndarray | None:
    """The buffer `run` receives `op` into, made before the round: allocating 2 MiB inside it
    took 22-37 ms of wall time on a loaded machine, 12-20 µs of a 108 µs all-to-all."""
    return np.zeros_like(data) if op in SEPARATE_OUTPUT and data is not None else None


def run(op: str, algorithm: str, transport: Transport, group: list[int], data: np.ndarray | None,
        tag_base: int, services: tuple[int, ...] = (), chunks: int = 0,
        out: np.ndarray | None = None) -> tuple[np.ndarray | None, list]:
    """Run the collective; returns this rank's result (what `expected` describes) and its messages.
    A CPU machine (in `services`, not in `group`) passes no data and gets no result. `out` is
    output_buffer's, where the op has one (else made here)."""
    if algorithm in SERVICE_ALGORITHMS:
        records = byteps.byteps_allreduce(transport, group, list(services), data, chunks,
                                          classic=algorithm == "ps", tag_base=tag_base)
        return data, records
    assert data is not None  # only CPU machines pass none, and they take part in BytePS/PS alone
    if algorithm == "ina":
        raise ValueError("INA all-reduce runs through the agent's INA endpoint, not over a Transport")
    n, pos = len(group), group.index(transport.rank)
    if op == "allreduce":
        records = getattr(c, ALGORITHMS[(op, algorithm)])(transport, group, data, tag_base=tag_base)
        return data, records
    if op == "reducescatter":
        records = c.ring_reduce_scatter(transport, group, data, tag_base=tag_base)
        a, b = chunk_bounds(data.size, n)[(pos + 1) % n]
        return data[a:b], records
    if op == "allgather":
        return data, c.ring_allgather(transport, group, data, tag_base=tag_base)
    if op == "broadcast":
        return data, c.tree_broadcast(transport, group, data, root=0, tag_base=tag_base)
    if op == "reduce":
        return c.tree_reduce_to_root(transport, group, data, tag_base=tag_base)
    if op == "gather":
        return data, c.direct_gather(transport, group, data, tag_base=tag_base)
    if op == "scatter":
        records = c.direct_scatter(transport, group, data, tag_base=tag_base)
        a, b = chunk_bounds(data.size, n)[pos]
        return data[a:b], records
    if op == "alltoall":
        received = np.zeros_like(data) if out is None else out
        return received, c.alltoall(transport, group, data, received, tag_base=tag_base)
    if op == "sendrecv":  # a ring shift: what pipeline stages do with activations
        received = np.zeros_like(data) if out is None else out
        records = c.sendrecv(transport, group[(pos + 1) % n], data, group[(pos - 1) % n], received, tag=tag_base)
        return received, records
    raise ValueError(f"unsupported collective {op}/{algorithm}")


def expected(op: str, seed: int, iteration: int, pos: int, ranks: int, elements: int) -> np.ndarray:
    """The result rank `pos` must hold, computed with numpy from every rank's input."""
    if op == "allreduce":
        return expected_sum(seed, iteration, ranks, elements)
    if op == "reducescatter":
        a, b = chunk_bounds(elements, ranks)[(pos + 1) % ranks]
        return expected_sum(seed, iteration, ranks, elements)[a:b]
    if op == "allgather":
        bounds = chunk_bounds(elements, ranks)
        return np.concatenate([gradient(seed, iteration, r, elements)[a:b] for r, (a, b) in enumerate(bounds)])
    if op == "broadcast":
        return gradient(seed, iteration, 0, elements)
    if op == "reduce":  # the root holds the sum; the others their own input
        return expected_sum(seed, iteration, ranks, elements) if pos == 0 else gradient(seed, iteration, pos, elements)
    if op == "gather":  # the root holds every rank's chunk; the others their own chunk alone
        if pos == 0:
            return expected("allgather", seed, iteration, pos, ranks, elements)
        return make_input(op, seed, iteration, pos, ranks, elements)
    if op == "scatter":
        a, b = chunk_bounds(elements, ranks)[pos]
        return gradient(seed, iteration, 0, elements)[a:b]
    if op == "alltoall":
        block = elements // ranks
        return np.concatenate([gradient(seed, iteration, r, elements)[pos * block:(pos + 1) * block]
                               for r in range(ranks)])
    if op == "sendrecv":
        return gradient(seed, iteration, (pos - 1) % ranks, elements)
    raise ValueError(f"unsupported collective {op}")

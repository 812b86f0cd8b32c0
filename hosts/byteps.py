"""BytePS and the classic parameter server over a Transport: chunks of the buffer are hashed to
summation services on GPU and CPU machines (BytePS's load split, docs/byteps.md), workers push their
chunks, each service sums a chunk once all n workers' copies are in and sends the sum back.

The partition is pure, in testbed.shared.byteps_partition."""

from __future__ import annotations

import threading
import time

import numpy as np

from hosts.collectives import StepRecord
from hosts.transport import Transport
from testbed.shared.byteps_partition import (  # noqa: F401 (BytePS's names, shared with the oracle)
    MAX_CHUNK_BYTES,
    PartitionError,
    chunk_count,
    chunk_owners,
    node_loads,
    push_window,
    service_buckets,
    transfers,
)
from testbed.shared.collective_plans import chunk_bounds

PULL_TAG_OFFSET = 0x8000  # push of chunk c carries tag base + c, its sum comes back as base + 0x8000 + c
WAIT_TIMEOUT_S = 600.0


class _Service:
    """The summation service of one machine: sums each chunk it owns over all n workers. A GPU
    machine's sums start from its own copy; a CPU machine's from the first push that arrives."""

    def __init__(self, owned: list[int], workers: int, local: dict[int, np.ndarray]) -> None:
        self.workers = workers
        self.sums = {c: part.copy() for c, part in local.items()}
        self.counts = {c: (1 if c in local else 0) for c in owned}
        self.locks = {c: threading.Lock() for c in owned}

    def add(self, chunk: int, part: np.ndarray) -> np.ndarray | None:
        """Add one worker's copy; returns the finished sum when this was the last one."""
        with self.locks[chunk]:
            if chunk in self.sums:
                self.sums[chunk] += part
            else:
                self.sums[chunk] = part.copy()
            self.counts[chunk] += 1
            return self.sums[chunk] if self.counts[chunk] == self.workers else None


def byteps_allreduce(transport: Transport, group: list[int], services: list[int], data: np.ndarray | None,
                     chunks: int, classic: bool = False, tag_base: int = 0,
                     clock=time.monotonic) -> list[StepRecord]:
    """Sum `data` in place over the GPU machines of `group`; CPU machines in `services` only sum
    (they pass None: each push carries its chunk, and its sum goes back as it came)."""
    if data is None:  # a CPU machine: nothing of its own to push or to overwrite
        data = np.zeros(0, dtype=np.float32)
    n, k = len(group), len(services)
    nodes = list(group) + list(services)
    me = nodes.index(transport.rank)
    is_worker = me < n
    owners = chunk_owners(n, k, classic, chunks)
    if chunks > PULL_TAG_OFFSET:
        raise PartitionError(f"{chunks} chunks exceed the tag space ({PULL_TAG_OFFSET})")
    start = clock()
    records: list[StepRecord] = []
    owned = [c for c, o in enumerate(owners) if o == me]
    bounds = chunk_bounds(data.size, chunks) if is_worker else []
    service = _Service(owned, n, {c: data[a:b] for c in owned for a, b in [bounds[c]]} if is_worker else {})
    errors: list[BaseException] = []
    handles = []

    def finished_chunk(chunk: int, total: np.ndarray) -> None:
        if is_worker:
            a, b = bounds[chunk]
            data[a:b] = total
        for worker in range(n):
            if worker != me:
                handles.append(transport.send(group[worker], tag_base + PULL_TAG_OFFSET + chunk, total))
                now = clock()
                records.append(StepRecord("sum-out", chunk, group[worker], None, int(total.nbytes), now, now))

    def receive_from(peer_index: int) -> None:
        """Exactly the messages this peer owes: pushes of the chunks I own (from a worker) and
        sums of the chunks it owns (to a worker)."""
        expect = (len(owned) if peer_index < n else 0) + (owners.count(peer_index) if is_worker else 0)
        peer = nodes[peer_index]
        try:
            for _ in range(expect):
                tag, payload = transport.recv_any(peer)
                arrived = clock()
                chunk = tag - tag_base
                part = payload.view(np.float32 if data is None else data.dtype)
                if chunk >= PULL_TAG_OFFSET:
                    chunk -= PULL_TAG_OFFSET
                    a, b = bounds[chunk]
                    data[a:b] = part
                    records.append(StepRecord("pull", chunk, None, peer, int(payload.nbytes), start, arrived))
                    continue
                records.append(StepRecord("push-in", chunk, None, peer, int(payload.nbytes), start, arrived))
                total = service.add(chunk, part)
                if total is not None:
                    finished_chunk(chunk, total)
        except BaseException as error:  # reported on the calling thread
            errors.append(error)

    def push_in_order() -> None:
        """Chunks leave in chunk order, a window at a time, so every worker's copy of chunk c reaches
        its service at about the same time and sums flow back while pushes go on (all at once,
        TCP would favour some connections and hold back every service's sums). A chunk counts as
        in flight until its service has it (rendezvous), not until the kernel buffered it, and
        the window waits for its oldest chunk: each measured faster at k = n."""
        in_flight: list = []
        window = push_window(owners)
        try:
            for chunk, owner in enumerate(owners):
                if owner == me:
                    continue
                a, b = bounds[chunk]
                in_flight.append(transport.send(nodes[owner], tag_base + chunk, data[a:b], confirm=True))
                now = clock()
                records.append(StepRecord("push", chunk, nodes[owner], None, int(data[a:b].nbytes), now, now))
                if len(in_flight) >= window:
                    in_flight.pop(0).wait(WAIT_TIMEOUT_S)
            for handle in in_flight:
                handle.wait(WAIT_TIMEOUT_S)
        except BaseException as error:  # reported on the calling thread
            errors.append(error)

    if n == 1:  # a lone worker owns every chunk and its sums are already complete
        for chunk in owned:
            finished_chunk(chunk, service.sums[chunk])
    # One reader per peer: a peer's pushes and sums share its connection and arrive in its order.
    threads = [threading.Thread(target=receive_from, args=(i,), daemon=True)
               for i in range(n + k) if i != me and (i < n or is_worker)]
    if is_worker:
        threads.append(threading.Thread(target=push_in_order, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_TIMEOUT_S)
        if thread.is_alive():
            raise TimeoutError(f"rank {transport.rank}: BytePS chunks did not arrive within {WAIT_TIMEOUT_S:.0f} s")
    if errors:
        raise errors[0]
    for handle in handles:
        handle.wait(WAIT_TIMEOUT_S)
    # The whole exchange as one record: what a busiest machine received over its duration is the
    # rate its link achieved (single chunks share the link with every other connection); the
    # others' links idle part of the time by design, so they say nothing of the rate.
    loads = node_loads(n, k, classic, chunks).received
    busiest = loads[me] >= max(loads) * (1 - 1e-9)
    received = sum(r.bytes for r in records if r.phase in ("pull", "push-in")) if busiest else 0
    records.append(StepRecord("byteps", chunks, None, None, 0, start, clock(), received))
    return records

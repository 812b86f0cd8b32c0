"""Collectives over a Transport with real numpy data: each algorithm's plan (the exchanges of
testbed.shared.collective_plans, which the oracle counts too) executed message by message, plus
point-to-point and a ring barrier. Each returns the StepRecords of its messages."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hosts.transport import SendHandle, Transport
from testbed.shared import collective_plans as plans
from testbed.shared.collective_plans import ELEMENT_BYTES, Exchange

SEND_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class StepRecord:
    """One message exchange of a collective, on the host's monotonic clock."""

    phase: str
    step: int
    send_peer: int | None
    recv_peer: int | None
    bytes: int  # sent
    start_s: float
    end_s: float
    recv_bytes: int = 0


class _Exchange:
    """Send and receive at once (the send runs on the transport's sender thread) and record it.

    `confirm` makes each send complete only once delivered, and move only once its receiver
    reached the exchange (rendezvous, as the oracle runs these step by step). Ring algorithms do
    not need it (every step already waits for the neighbour's message); trees, halving-doubling
    and all-to-all do, or a rank would start its next send while the previous one is still on the
    wire, or into a receiver still busy with the step before."""

    def __init__(self, transport: Transport, tag_base: int, clock, confirm: bool = True,
                 rendezvous: bool | None = None) -> None:
        self.transport, self.tag, self.clock, self.confirm = transport, tag_base, clock, confirm
        self.rendezvous = confirm if rendezvous is None else rendezvous
        self.records: list[StepRecord] = []
        self.ready_s: float | None = None  # when this rank's last exchange ended (shared clock)

    def __call__(self, phase: str, send_to: int | None, payload: np.ndarray | None, recv_from: int | None,
                 into: np.ndarray | None, reduce: bool = False, step: int | None = None) -> None:
        """`step` fixes the tag offset where partners take different numbers of steps."""
        start = self.clock()
        # A rendezvous exchange is reached when the previous one ended, not when this thread got
        # round to it: the transport counts alpha from there (see CLEAR_TO_SEND).
        ready = None
        if self.rendezvous and self.ready_s is not None:
            start = ready = min(start, self.ready_s)
        step = len(self.records) if step is None else step
        handle = None
        if send_to is not None and payload is not None:
            handle = self.transport.send(send_to, self.tag + step, payload, confirm=self.confirm,
                                         rendezvous=self.rendezvous, ready_s=ready)
        received = None
        if recv_from is not None and into is not None:
            # The receive ends when its message was in (what the transport stamps, if it does);
            # a reduction's add is not timed, as the alpha-beta model has none.
            if reduce:
                incoming = np.empty_like(into)
                arrived = self.transport.recv_into(recv_from, self.tag + step, incoming, ready_s=ready)
                into += incoming
            else:
                arrived = self.transport.recv_into(recv_from, self.tag + step, into, ready_s=ready)
            received = self.clock() if arrived is None else arrived
        if handle is not None:
            handle.wait(SEND_TIMEOUT_S)
        size = int(payload.nbytes) if payload is not None and send_to is not None else 0
        got = int(into.nbytes) if into is not None and recv_from is not None else 0
        end = _ended(handle, received, self.clock)
        self.records.append(StepRecord(phase, step, send_to, recv_from, size, start, end, got))
        self.ready_s = end


def _ended(handle: SendHandle | None, received: float | None, clock) -> float:
    """When a step ended: its confirmed send delivered and its receive (if any) in; a step whose
    send was not confirmed when its wait returned (`clock` now)."""
    if handle is None:
        return clock() if received is None else received
    if handle.delivered_s is None:
        return clock()
    return handle.delivered_s if received is None else max(handle.delivered_s, received)


def execute(transport: Transport, group: list[int], plan: list[Exchange], send: np.ndarray,
            recv: np.ndarray | None = None, tag_base: int = 0, clock=time.monotonic,
            confirm: bool = True) -> list[StepRecord]:
    """Run this rank's plan (testbed.shared.collective_plans) over the transport: positions become
    the group's ranks, element ranges views of `send` and `recv` (the same buffer unless given)."""
    recv = send if recv is None else recv
    ex = _Exchange(transport, tag_base, clock, confirm)
    for e in plan:
        if e.send_to is None and e.recv_from is None:  # an idle round keeps its place in the records
            now = clock()
            ex.records.append(StepRecord(e.phase, e.step, None, None, 0, now, now))
            continue
        payload = send[e.send[0]:e.send[1]] if e.send_to is not None and e.send is not None else None
        into = recv[e.recv[0]:e.recv[1]] if e.recv_from is not None and e.recv is not None else None
        ex(e.phase, None if e.send_to is None else group[e.send_to], payload,
           None if e.recv_from is None else group[e.recv_from], into, reduce=e.reduce, step=e.step)
    return ex.records


def _run(make, transport: Transport, group: list[int], data: np.ndarray, tag_base: int, clock,
         confirm: bool, **options) -> list[StepRecord]:
    plan = make(group.index(transport.rank), len(group), data.size, **options)
    return execute(transport, group, plan, data, tag_base=tag_base, clock=clock, confirm=confirm)


def ring_reduce_scatter(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                        clock=time.monotonic) -> list[StepRecord]:
    """After this, chunk (pos + 1) mod n of `data` holds the sum over the group (pos = rank's index)."""
    return _run(plans.ring_reduce_scatter, transport, group, data, tag_base, clock, confirm=False)


def ring_allgather(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                   clock=time.monotonic, owned_offset: int = 0) -> list[StepRecord]:
    """Every rank starts owning chunk (pos + owned_offset) mod n of `data`; after this all own all."""
    return _run(plans.ring_allgather, transport, group, data, tag_base, clock, confirm=False,
                owned_offset=owned_offset)


def ring_allreduce(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                   clock=time.monotonic) -> list[StepRecord]:
    """Sum `data` in place across `group`: reduce-scatter then all-gather around the ring."""
    return _run(plans.ring_allreduce, transport, group, data, tag_base, clock, confirm=False)


def halving_doubling_allreduce(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                               clock=time.monotonic) -> list[StepRecord]:
    """Rabenseifner's all-reduce, for any group size (the plan folds the ranks beyond a power of two)."""
    return _run(plans.halving_doubling_allreduce, transport, group, data, tag_base, clock, confirm=True)


def tree_broadcast(transport: Transport, group: list[int], data: np.ndarray, root: int = 0, tag_base: int = 0,
                   clock=time.monotonic) -> list[StepRecord]:
    """Binomial tree from group[root]: ceil(log2 n) rounds, each holder sends the whole buffer on."""
    return _run(plans.tree_broadcast, transport, group, data, tag_base, clock, confirm=True, root=root)


def tree_reduce(transport: Transport, group: list[int], data: np.ndarray, root: int = 0, tag_base: int = 0,
                clock=time.monotonic) -> list[StepRecord]:
    """Binomial tree towards group[root]: the mirror of tree_broadcast, summing on the way."""
    return _run(plans.tree_reduce, transport, group, data, tag_base, clock, confirm=True, root=root)


def tree_allreduce(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                   clock=time.monotonic) -> list[StepRecord]:
    return _run(plans.tree_allreduce, transport, group, data, tag_base, clock, confirm=True)


def execute_at_once(transport: Transport, group: list[int], plan: list[Exchange], data: np.ndarray,
                    tag_base: int = 0, clock=time.monotonic) -> list[StepRecord]:
    """Run a plan whose exchanges are independent (plans.CONCURRENT): every send is issued first,
    then the receives are taken in order as they arrive, then the sends are waited for. Each
    record spans from the start to when its own message was done."""
    start = clock()
    sends = [(e, transport.send(group[e.send_to], tag_base + e.step, data[e.send[0]:e.send[1]], confirm=True))
             for e in plan if e.send_to is not None and e.send is not None]
    records = []
    for e in plan:
        if e.recv_from is not None and e.recv is not None:
            arrived = transport.recv_into(group[e.recv_from], tag_base + e.step, data[e.recv[0]:e.recv[1]])
            records.append(StepRecord(e.phase, e.step, None, group[e.recv_from], 0, start,
                                      clock() if arrived is None else arrived, ELEMENT_BYTES * (e.recv[1] - e.recv[0])))
    for e, handle in sends:
        handle.wait(SEND_TIMEOUT_S)
        assert e.send_to is not None and e.send is not None
        records.append(StepRecord(e.phase, e.step, group[e.send_to], None, ELEMENT_BYTES * (e.send[1] - e.send[0]),
                                  start, _ended(handle, None, clock)))
    return records


def tree_reduce_to_root(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                        clock=time.monotonic) -> tuple[np.ndarray, list[StepRecord]]:
    """Binomial-tree reduce to group[0]: the root ends with the sum; every other rank keeps its
    own input untouched (the tree adds into a working copy)."""
    work = data.copy()
    records = tree_reduce(transport, group, work, root=0, tag_base=tag_base, clock=clock)
    return (work if group.index(transport.rank) == 0 else data), records


def direct_gather(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                  clock=time.monotonic) -> list[StepRecord]:
    """Every rank's own chunk of `data` to group[0], into the same chunk of the root's buffer."""
    plan = plans.direct_gather(group.index(transport.rank), len(group), data.size)
    return execute_at_once(transport, group, plan, data, tag_base, clock)


def direct_scatter(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                   clock=time.monotonic) -> list[StepRecord]:
    """Chunk r of group[0]'s `data` to rank r, into the same chunk of its buffer."""
    plan = plans.direct_scatter(group.index(transport.rank), len(group), data.size)
    return execute_at_once(transport, group, plan, data, tag_base, clock)


def alltoall(transport: Transport, group: list[int], send: np.ndarray, recv: np.ndarray, tag_base: int = 0,
             clock=time.monotonic) -> list[StepRecord]:
    """Block j of `send` goes to group[j]; block i of `recv` comes from group[i] (pairwise exchange).
    Both buffers hold n equal blocks."""
    n = len(group)
    if send.size % n or recv.size != send.size:
        raise ValueError(f"all-to-all needs equal buffers of n×block elements (n={n}, got {send.size}, {recv.size})")
    pos, block = group.index(transport.rank), send.size // n
    recv[pos * block:(pos + 1) * block] = send[pos * block:(pos + 1) * block]
    return execute(transport, group, plans.alltoall(pos, n, send.size), send, recv, tag_base, clock)


def sendrecv(transport: Transport, peer_send: int | None, payload: np.ndarray | None, peer_recv: int | None,
             into: np.ndarray | None, tag: int, clock=time.monotonic) -> list[StepRecord]:
    """Point-to-point, as between pipeline stages."""
    ex = _Exchange(transport, tag, clock, rendezvous=False)  # a ring shift: every pair moves at once
    ex("send-recv", peer_send, payload, peer_recv, into)
    return ex.records


STOP = -1.0  # what ring_barrier returns to every rank when the first rank's `go` said stop


def ring_barrier(transport: Transport, group: list[int], tag: int, start_delay_s: float = 0.02,
                 clock=time.monotonic, learned: dict | None = None,
                 go: Callable[[], float | None] | None = None) -> float:
    """Block until every rank of `group` has arrived; returns a common start time on the shared clock
    (or STOP, when `go`, asked by the first rank once all have arrived, returns None: the group is
    done; else it returns the earliest start time, 0 for none).

    The first rank collects an arrival token around the ring, then circulates a start time slightly
    in the future, so that all ranks begin the next iteration at the same instant. The start time
    must outlast the start token's trip around the ring: `learned` (kept by the caller between
    barriers) holds how long the first rank saw the last trip take, and the next start time leaves
    1.5 times that (a trip took ~1 s at 128 ranks on 2 cores, against the 0.15 s allowed before).
    """
    n = len(group)
    if n == 1:
        earliest = 0.0 if go is None else go()
        return STOP if earliest is None else max(clock(), earliest)
    pos = group.index(transport.rank)
    right, left = group[(pos + 1) % n], group[(pos - 1) % n]
    token = np.zeros(1, dtype=np.float64)
    if pos == 0:
        transport.send(right, tag, token).wait(SEND_TIMEOUT_S)
        transport.recv_into(left, tag, token)
        earliest = 0.0 if go is None else go()
        sent = clock()
        trip_s = (learned or {}).get("trip_s", 0.0)
        token[0] = STOP if earliest is None else max(sent + max(start_delay_s + 1e-3 * n, 1.5 * trip_s), earliest)
        transport.send(right, tag + 1, token).wait(SEND_TIMEOUT_S)
        transport.recv_into(left, tag + 1, token)
        if learned is not None:
            learned["trip_s"] = clock() - sent
    else:
        transport.recv_into(left, tag, token)
        transport.send(right, tag, token).wait(SEND_TIMEOUT_S)
        transport.recv_into(left, tag + 1, token)
        transport.send(right, tag + 1, token).wait(SEND_TIMEOUT_S)
    return float(token[0])

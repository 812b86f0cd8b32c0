"""Collectives over a Transport with real numpy data: ring, halving-doubling and tree algorithms,
all-to-all, point-to-point, and a ring barrier. Each returns the StepRecords of its messages."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from hosts.transport import Transport

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


def _bounds(elements: int, parts: int) -> list[tuple[int, int]]:
    """Chunk edges as numpy.array_split makes them, so every rank agrees for any element count."""
    sizes = [elements // parts + (1 if i < elements % parts else 0) for i in range(parts)]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    return [(int(s), int(s + n)) for s, n in zip(starts, sizes)]


class _Exchange:
    """Send and receive at once (the send runs on the transport's sender thread) and record it.

    `confirm` makes each send complete only once delivered. Ring algorithms do not need it (every
    step already waits for the neighbour's message); trees, halving-doubling and all-to-all do, or
    a rank would start its next send while the previous one is still on the wire."""

    def __init__(self, transport: Transport, tag_base: int, clock, confirm: bool = True) -> None:
        self.transport, self.tag, self.clock, self.confirm = transport, tag_base, clock, confirm
        self.records: list[StepRecord] = []

    def __call__(self, phase: str, send_to: int | None, payload: np.ndarray | None, recv_from: int | None,
                 into: np.ndarray | None, reduce: bool = False, step: int | None = None) -> None:
        """`step` fixes the tag offset where partners take different numbers of steps."""
        start = self.clock()
        step = len(self.records) if step is None else step
        handle = None
        if send_to is not None and payload is not None:
            handle = self.transport.send(send_to, self.tag + step, payload, confirm=self.confirm)
        if recv_from is not None and into is not None:
            if reduce:
                incoming = np.empty_like(into)
                self.transport.recv_into(recv_from, self.tag + step, incoming)
                into += incoming
            else:
                self.transport.recv_into(recv_from, self.tag + step, into)
        if handle is not None:
            handle.wait(SEND_TIMEOUT_S)
        size = int(payload.nbytes) if payload is not None and send_to is not None else 0
        got = int(into.nbytes) if into is not None and recv_from is not None else 0
        self.records.append(StepRecord(phase, step, send_to, recv_from, size, start, self.clock(), got))


def _ring_pass(transport: Transport, group: list[int], data: np.ndarray, ex: _Exchange, phase: str,
               offset: int, reduce: bool) -> list[StepRecord]:
    """n-1 steps around the ring: in step t a rank sends chunk (pos + offset - t) to its right and
    receives chunk (pos + offset - t - 1) from its left, adding it in when `reduce`."""
    n = len(group)
    if n > 1:
        pos = group.index(transport.rank)
        right, left = group[(pos + 1) % n], group[(pos - 1) % n]
        chunks = [data[a:b] for a, b in _bounds(data.size, n)]
        for t in range(n - 1):
            ex(phase, right, chunks[(pos + offset - t) % n], left, chunks[(pos + offset - t - 1) % n], reduce=reduce)
    return ex.records


def ring_reduce_scatter(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                        clock=time.monotonic, _exchange: _Exchange | None = None) -> list[StepRecord]:
    """After this, chunk (pos + 1) mod n of `data` holds the sum over the group (pos = rank's index)."""
    ex = _exchange or _Exchange(transport, tag_base, clock, confirm=False)
    return _ring_pass(transport, group, data, ex, "reduce-scatter", 0, reduce=True)


def ring_allgather(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                   clock=time.monotonic, owned_offset: int = 0, _exchange: _Exchange | None = None) -> list[StepRecord]:
    """Every rank starts owning chunk (pos + owned_offset) mod n of `data`; after this all own all."""
    ex = _exchange or _Exchange(transport, tag_base, clock, confirm=False)
    return _ring_pass(transport, group, data, ex, "all-gather", owned_offset, reduce=False)


def ring_allreduce(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                   clock=time.monotonic) -> list[StepRecord]:
    """Sum `data` in place across `group`: reduce-scatter then all-gather around the ring."""
    ex = _Exchange(transport, tag_base, clock, confirm=False)
    ring_reduce_scatter(transport, group, data, _exchange=ex)
    return ring_allgather(transport, group, data, owned_offset=1, _exchange=ex)


def halving_doubling_allreduce(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                               clock=time.monotonic) -> list[StepRecord]:
    """Rabenseifner: recursive-halving reduce-scatter, recursive-doubling all-gather. With n not a
    power of two, the first 2r ranks pair up so that r of them hand their data over and sit out."""
    n = len(group)
    ex = _Exchange(transport, tag_base, clock)
    if n == 1:
        return ex.records
    pos = group.index(transport.rank)
    p2 = 1 << (n.bit_length() - 1)
    extra = n - p2
    unfold_step = 2 * p2.bit_length() + 1  # beyond every halving and doubling step
    if pos < 2 * extra:  # fold: odd ranks give their data to the even rank below them
        if pos % 2:
            ex("fold", group[pos - 1], data, None, None, step=0)
            ex("unfold", None, None, group[pos - 1], data, step=unfold_step)
            return ex.records
        ex("fold", None, None, group[pos + 1], data, reduce=True, step=0)
        vpos = pos // 2
    else:
        vpos = pos - extra
    members = [group[2 * v] if v < extra else group[v + extra] for v in range(p2)]
    lo, hi = 0, data.size
    history: list[tuple[int, tuple[int, int], tuple[int, int]]] = []
    distance = p2 // 2
    while distance:
        partner_v = vpos ^ distance
        mid = lo + (hi - lo) // 2
        keep_low = vpos < partner_v
        keep, give = ((lo, mid), (mid, hi)) if keep_low else ((mid, hi), (lo, mid))
        ex("halving", members[partner_v], data[give[0]:give[1]], members[partner_v], data[keep[0]:keep[1]],
           reduce=True, step=1 + len(history))
        history.append((partner_v, keep, give))
        lo, hi = keep
        distance //= 2
    for index, (partner_v, keep, give) in enumerate(reversed(history)):
        ex("doubling", members[partner_v], data[keep[0]:keep[1]], members[partner_v], data[give[0]:give[1]],
           step=1 + len(history) + index)
    if pos < 2 * extra:
        ex("unfold", group[pos + 1], data, None, None, step=unfold_step)
    return ex.records


def _binomial_rounds(rel: int, n: int) -> list[tuple[int, int | None]]:
    """Per round of a binomial tree rooted at relative rank 0: (+1, child) where this rank passes the
    buffer down, (-1, parent) where it receives it, (0, None) where it is idle that round."""
    rounds: list[tuple[int, int | None]] = []
    mask = 1
    while mask < n:
        if rel < mask and rel + mask < n:
            rounds.append((1, rel + mask))
        elif mask <= rel < 2 * mask:
            rounds.append((-1, rel - mask))
        else:
            rounds.append((0, None))
        mask <<= 1
    return rounds


def _tree(transport: Transport, group: list[int], data: np.ndarray, root: int, tag_base: int, clock,
          toward_root: bool) -> list[StepRecord]:
    n = len(group)
    ex = _Exchange(transport, tag_base, clock)
    rel = (group.index(transport.rank) - root) % n
    rounds = _binomial_rounds(rel, n)
    phase = "reduce" if toward_root else "broadcast"
    # Reducing runs the broadcast's rounds backwards with the direction of every message flipped.
    for direction, peer in (reversed(rounds) if toward_root else rounds):
        if direction == 0:
            ex.records.append(StepRecord(f"{phase}-idle", len(ex.records), None, None, 0, clock(), clock()))
            continue
        assert peer is not None  # a round with a direction has a peer
        other = group[(peer + root) % n]
        if (direction > 0) != toward_root:  # sending: down the tree, or up towards the root
            ex(phase, other, data, None, None)
        else:
            ex(phase, None, None, other, data, reduce=toward_root)
    return ex.records


def tree_broadcast(transport: Transport, group: list[int], data: np.ndarray, root: int = 0, tag_base: int = 0,
                   clock=time.monotonic) -> list[StepRecord]:
    """Binomial tree from group[root]: ceil(log2 n) rounds, each holder sends the whole buffer on."""
    return _tree(transport, group, data, root, tag_base, clock, toward_root=False)


def tree_reduce(transport: Transport, group: list[int], data: np.ndarray, root: int = 0, tag_base: int = 0,
                clock=time.monotonic) -> list[StepRecord]:
    """Binomial tree towards group[root]: the mirror of tree_broadcast, summing on the way."""
    return _tree(transport, group, data, root, tag_base, clock, toward_root=True)


def tree_allreduce(transport: Transport, group: list[int], data: np.ndarray, tag_base: int = 0,
                   clock=time.monotonic) -> list[StepRecord]:
    records = tree_reduce(transport, group, data, 0, tag_base, clock)
    return records + tree_broadcast(transport, group, data, 0, tag_base + len(records), clock)


def alltoall(transport: Transport, group: list[int], send: np.ndarray, recv: np.ndarray, tag_base: int = 0,
             clock=time.monotonic) -> list[StepRecord]:
    """Block j of `send` goes to group[j]; block i of `recv` comes from group[i] (pairwise exchange).
    Both buffers hold n equal blocks."""
    n = len(group)
    if send.size % n or recv.size != send.size:
        raise ValueError(f"all-to-all needs equal buffers of n×block elements (n={n}, got {send.size}, {recv.size})")
    ex = _Exchange(transport, tag_base, clock)
    pos = group.index(transport.rank)
    send_blocks = np.split(send, n)
    recv_blocks = np.split(recv, n)
    recv_blocks[pos][...] = send_blocks[pos]
    for t in range(1, n):
        to, frm = (pos + t) % n, (pos - t) % n
        ex("all-to-all", group[to], send_blocks[to], group[frm], recv_blocks[frm])
    return ex.records


def sendrecv(transport: Transport, peer_send: int | None, payload: np.ndarray | None, peer_recv: int | None,
             into: np.ndarray | None, tag: int, clock=time.monotonic) -> list[StepRecord]:
    """Point-to-point, as between pipeline stages."""
    ex = _Exchange(transport, tag, clock)
    ex("send-recv", peer_send, payload, peer_recv, into)
    return ex.records


def ring_barrier(transport: Transport, group: list[int], tag: int, start_delay_s: float = 0.02,
                 clock=time.monotonic, learned: dict | None = None) -> float:
    """Block until every rank of `group` has arrived; returns a common start time on the shared clock.

    The first rank collects an arrival token around the ring, then circulates a start time slightly
    in the future, so that all ranks begin the next iteration at the same instant. The start time
    must outlast the start token's trip around the ring: `learned` (kept by the caller between
    barriers) holds how long the first rank saw the last trip take, and the next start time leaves
    1.5 times that (a trip took ~1 s at 128 ranks on 2 cores, against the 0.15 s allowed before).
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
        sent = clock()
        trip_s = (learned or {}).get("trip_s", 0.0)
        token[0] = sent + max(start_delay_s + 1e-3 * n, 1.5 * trip_s)
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

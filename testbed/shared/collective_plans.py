"""Each collective algorithm as a plan: per rank, the exchanges it makes (to whom it sends which
elements, from whom it receives which, whether it adds them in). The host agents execute these
plans over real sockets (hosts.collectives); the oracle and the schedule's traffic matrix count
their bytes. One description of every algorithm, so the two cannot drift.

Ranks are positions in the group (0..n-1); element ranges are half-open [start, end) of the
buffer, cut as numpy.array_split cuts it so every rank agrees for any element count."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from testbed.model.schedule import Collective, GpuSchedule

ELEMENT_BYTES = 4  # float32 gradients

# What the host agents run: (operation, algorithm) -> the agents' function for it.
ALGORITHMS = {
    ("allreduce", "ring"): "ring_allreduce",
    ("allreduce", "halving-doubling"): "halving_doubling_allreduce",
    ("allreduce", "tree"): "tree_allreduce",
    ("reducescatter", "ring"): "ring_reduce_scatter",
    ("allgather", "ring"): "ring_allgather",
    ("broadcast", "tree"): "tree_broadcast",
    ("reduce", "tree"): "tree_reduce",
    ("gather", "direct"): "direct_gather",
    ("scatter", "direct"): "direct_scatter",
    ("alltoall", "ring"): "alltoall",
    ("sendrecv", "ring"): "sendrecv",
    ("allreduce", "byteps"): "byteps_allreduce",
    ("allreduce", "ps"): "byteps_allreduce",  # classic: every chunk summed on a CPU machine
    ("allreduce", "ina"): "ina",  # through the aggregation node: the agent's INA endpoint runs it
}
SERVICE_ALGORITHMS = ("byteps", "ps")  # these also run on CPU machines (summation services)
SUPPORTED_COLLECTIVES = frozenset(ALGORITHMS)

Range = tuple[int, int]


@dataclass(frozen=True)
class Exchange:
    """One step of a rank's plan: send `send` (elements of the send buffer) to `send_to` and receive
    `recv` (of the receive buffer) from `recv_from` at once; either side may be absent (an idle
    round of a tree has neither). `step` is the message tag's offset from the collective's base."""

    phase: str
    step: int
    send_to: int | None = None
    send: Range | None = None
    recv_from: int | None = None
    recv: Range | None = None
    reduce: bool = False  # add what arrives into the receive range instead of overwriting it


def barrier_ring_next(rank: int, group: list[int]) -> int:
    """The rank each agent connects to first and passes the barrier's tokens to before every round
    (`group`: the ranks of its job, which keep a barrier of their own)."""
    return group[(group.index(rank) + 1) % len(group)]


def barrier_pairs(group: list[int]) -> list[tuple[int, int]]:
    """The pairs the barrier's tokens cross: each rank of `group` to its next (none alone)."""
    return [(rank, barrier_ring_next(rank, group)) for rank in group] if len(group) > 1 else []


def supported(op: str, algorithm: str) -> bool:
    return (op, algorithm) in ALGORITHMS


def elements_for(op: str, size_bytes: int, ranks: int) -> int:
    """Element count of the buffer; all-to-all needs a multiple of the group size."""
    elements = max(ranks, size_bytes // ELEMENT_BYTES)
    return elements - elements % ranks if op == "alltoall" else elements


def chunk_bounds(elements: int, parts: int) -> list[Range]:
    """Chunk edges as numpy.array_split makes them."""
    sizes = [elements // parts + (1 if i < elements % parts else 0) for i in range(parts)]
    edges = [0]
    for size in sizes:
        edges.append(edges[-1] + size)
    return list(zip(edges[:-1], edges[1:]))


def _ring_pass(pos: int, n: int, elements: int, phase: str, offset: int, reduce: bool,
               first_step: int = 0) -> list[Exchange]:
    """n-1 steps around the ring: in step t a rank sends chunk (pos + offset - t) to its right and
    receives chunk (pos + offset - t - 1) from its left, adding it in when `reduce`."""
    if n <= 1:
        return []
    chunks = chunk_bounds(elements, n)
    right, left = (pos + 1) % n, (pos - 1) % n
    return [Exchange(phase, first_step + t, right, chunks[(pos + offset - t) % n], left,
                     chunks[(pos + offset - t - 1) % n], reduce) for t in range(n - 1)]


def ring_reduce_scatter(pos: int, n: int, elements: int) -> list[Exchange]:
    """After it, chunk (pos + 1) mod n holds the sum over the group."""
    return _ring_pass(pos, n, elements, "reduce-scatter", 0, reduce=True)


def ring_allgather(pos: int, n: int, elements: int, owned_offset: int = 0, first_step: int = 0) -> list[Exchange]:
    """Every rank starts owning chunk (pos + owned_offset) mod n; after it all own all."""
    return _ring_pass(pos, n, elements, "all-gather", owned_offset, reduce=False, first_step=first_step)


def ring_allreduce(pos: int, n: int, elements: int) -> list[Exchange]:
    """Reduce-scatter then all-gather around the ring: 2(n-1) steps."""
    scatter = ring_reduce_scatter(pos, n, elements)
    return scatter + ring_allgather(pos, n, elements, owned_offset=1, first_step=len(scatter))


def halving_doubling_allreduce(pos: int, n: int, elements: int) -> list[Exchange]:
    """Rabenseifner: recursive-halving reduce-scatter, recursive-doubling all-gather. With n not a
    power of two, the first 2r ranks pair up so that r of them hand their data over and sit out."""
    if n == 1:
        return []
    whole = (0, elements)
    p2 = 1 << (n.bit_length() - 1)
    extra = n - p2
    unfold_step = 2 * p2.bit_length() + 1  # beyond every halving and doubling step
    plan: list[Exchange] = []
    if pos < 2 * extra:  # fold: odd ranks give their data to the even rank below them
        if pos % 2:
            return [Exchange("fold", 0, pos - 1, whole), Exchange("unfold", unfold_step, recv_from=pos - 1, recv=whole)]
        plan.append(Exchange("fold", 0, recv_from=pos + 1, recv=whole, reduce=True))
        vpos = pos // 2
    else:
        vpos = pos - extra
    members = [2 * v if v < extra else v + extra for v in range(p2)]
    lo, hi = 0, elements
    history: list[tuple[int, Range, Range]] = []
    distance = p2 // 2
    while distance:
        partner_v = vpos ^ distance
        mid = lo + (hi - lo) // 2
        keep, give = ((lo, mid), (mid, hi)) if vpos < partner_v else ((mid, hi), (lo, mid))
        plan.append(Exchange("halving", 1 + len(history), members[partner_v], give, members[partner_v], keep,
                             reduce=True))
        history.append((partner_v, keep, give))
        lo, hi = keep
        distance //= 2
    for index, (partner_v, keep, give) in enumerate(reversed(history)):
        plan.append(Exchange("doubling", 1 + len(history) + index, members[partner_v], keep, members[partner_v], give))
    if pos < 2 * extra:
        plan.append(Exchange("unfold", unfold_step, pos + 1, whole))
    return plan


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


def _tree(pos: int, n: int, elements: int, root: int, toward_root: bool, first_step: int = 0) -> list[Exchange]:
    """Reducing runs the broadcast's rounds backwards with the direction of every message flipped."""
    rounds = _binomial_rounds((pos - root) % n, n)
    phase = "reduce" if toward_root else "broadcast"
    whole = (0, elements)
    plan: list[Exchange] = []
    for direction, peer in (reversed(rounds) if toward_root else rounds):
        step = first_step + len(plan)
        if direction == 0 or peer is None:
            plan.append(Exchange(f"{phase}-idle", step))
        elif (direction > 0) != toward_root:  # sending: down the tree, or up towards the root
            plan.append(Exchange(phase, step, (peer + root) % n, whole))
        else:
            plan.append(Exchange(phase, step, recv_from=(peer + root) % n, recv=whole, reduce=toward_root))
    return plan


def tree_broadcast(pos: int, n: int, elements: int, root: int = 0) -> list[Exchange]:
    """Binomial tree from `root`: ceil(log2 n) rounds, each holder sends the whole buffer on."""
    return _tree(pos, n, elements, root, toward_root=False)


def tree_reduce(pos: int, n: int, elements: int, root: int = 0) -> list[Exchange]:
    """Binomial tree towards `root`: the mirror of tree_broadcast, summing on the way."""
    return _tree(pos, n, elements, root, toward_root=True)


def tree_allreduce(pos: int, n: int, elements: int) -> list[Exchange]:
    reduce = tree_reduce(pos, n, elements)
    return reduce + _tree(pos, n, elements, 0, toward_root=False, first_step=len(reduce))


def direct_gather(pos: int, n: int, elements: int, root: int = 0) -> list[Exchange]:
    """Every rank sends its own chunk straight to `root`, all at once; the root takes them in rank
    order (they arrive together, sharing its link)."""
    chunks = chunk_bounds(elements, n)
    if pos != root:
        return [Exchange("gather", 0, root, chunks[pos])]
    return [Exchange("gather", 0, recv_from=r, recv=chunks[r]) for r in range(n) if r != root]


def direct_scatter(pos: int, n: int, elements: int, root: int = 0) -> list[Exchange]:
    """`root` sends chunk r of its buffer straight to each rank r, all at once (sharing its link)."""
    chunks = chunk_bounds(elements, n)
    if pos != root:
        return [Exchange("scatter", 0, recv_from=root, recv=chunks[pos])]
    return [Exchange("scatter", 0, r, chunks[r]) for r in range(n) if r != root]


# Plans whose exchanges do not depend on one another: the executor issues every send at once
# rather than one step after the other (the eager transport takes the receives as they come).
CONCURRENT = frozenset({"direct_gather", "direct_scatter"})


def alltoall(pos: int, n: int, elements: int) -> list[Exchange]:
    """Block j of the send buffer goes to rank j, block i of the receive buffer comes from rank i
    (pairwise exchange); a rank's own block is copied, not sent."""
    block = elements // n
    return [Exchange("all-to-all", t - 1, (pos + t) % n, ((pos + t) % n * block, ((pos + t) % n + 1) * block),
                     (pos - t) % n, ((pos - t) % n * block, ((pos - t) % n + 1) * block)) for t in range(1, n)]


def ring_shift(pos: int, n: int, elements: int) -> list[Exchange]:
    """Point-to-point as between pipeline stages: the whole buffer to the right, from the left."""
    if n == 1:
        return []
    whole = (0, elements)
    return [Exchange("send-recv", 0, (pos + 1) % n, whole, (pos - 1) % n, whole)]


PLANS = {
    ("allreduce", "ring"): ring_allreduce,
    ("allreduce", "halving-doubling"): halving_doubling_allreduce,
    ("allreduce", "tree"): tree_allreduce,
    ("reducescatter", "ring"): ring_reduce_scatter,
    ("allgather", "ring"): ring_allgather,
    ("broadcast", "tree"): tree_broadcast,
    ("reduce", "tree"): tree_reduce,
    ("gather", "direct"): direct_gather,
    ("scatter", "direct"): direct_scatter,
    ("alltoall", "ring"): alltoall,
    ("sendrecv", "ring"): ring_shift,
}


def plan(op: str, algorithm: str, pos: int, n: int, elements: int) -> list[Exchange]:
    """Rank `pos`'s exchanges in the collective (over point-to-point messages)."""
    make = PLANS.get((op, algorithm))
    if make is None:
        raise ValueError(f"{op}/{algorithm} is not a point-to-point algorithm with a plan")
    return make(pos, n, elements)


def ring_allreduce_traffic(hosts: int, size_bytes: int) -> tuple[tuple[int, ...], ...]:
    """Bytes each rank sends to each other rank in one ring all-reduce (to its right neighbour)."""
    chunks = [size_bytes // hosts + (1 if i < size_bytes % hosts else 0) for i in range(hosts)]
    matrix = [[0] * hosts for _ in range(hosts)]
    for rank in range(hosts):
        # 2(n-1) steps; in step t rank sends chunk (rank - t) mod n, repeated for both phases.
        sent = sum(chunks[(rank - t) % hosts] for t in range(hosts - 1))
        sent += sum(chunks[(rank + 1 - t) % hosts] for t in range(hosts - 1))
        matrix[rank][(rank + 1) % hosts] = sent
    return tuple(tuple(row) for row in matrix)


@functools.lru_cache(maxsize=4096)  # simulations ask again for every collective they run
def collective_traffic(op: str, algorithm: str, hosts: int, size_bytes: int) -> tuple[tuple[int, ...], ...]:
    """Who sends how much to whom in one collective: its plan's bytes on a small buffer (4 KiB a
    rank), scaled to `size_bytes` (every message size is proportional to the buffer). Summation
    services (BytePS, PS) and INA move no bytes between the group's GPUs by this count: their
    traffic goes to CPU machines or the aggregation node."""
    if (op, algorithm) == ("allreduce", "ring"):
        return ring_allreduce_traffic(hosts, size_bytes)
    if (op, algorithm) not in PLANS:
        return tuple(tuple(0 for _ in range(hosts)) for _ in range(hosts))
    elements = elements_for(op, 4 * 1024 * hosts, hosts)
    sent = [[0] * hosts for _ in range(hosts)]
    for pos in range(hosts):
        for exchange in plan(op, algorithm, pos, hosts, elements):
            if exchange.send_to is not None and exchange.send is not None:
                sent[pos][exchange.send_to] += ELEMENT_BYTES * (exchange.send[1] - exchange.send[0])
    scale = size_bytes / (ELEMENT_BYTES * elements)
    # a pair the algorithm sends over carries at least a byte: a plan made from this matrix must
    # give it a path even when the buffer is smaller than the group
    return tuple(tuple(max(1, round(b * scale)) if b else 0 for b in row) for row in sent)


@functools.lru_cache(maxsize=4096)
def collective_edges(op: str, algorithm: str, hosts: int, size_bytes: int) -> tuple[tuple[int, int, int], ...]:
    """collective_traffic's entries with bytes, as (sender, receiver, bytes) positions in row
    order, without its hosts × hosts matrix for the ring collectives, whose every member sends to
    its right neighbour only (a data-parallel ring of thousands of GPUs made a matrix of
    gigabytes, and the simulation read one row of it)."""
    if algorithm != "ring" or op not in ("allreduce", "reducescatter", "allgather") or hosts < 2:
        block = collective_traffic(op, algorithm, hosts, size_bytes)
        return tuple((a, b, size) for a, row in enumerate(block) for b, size in enumerate(row) if size)
    if op == "allreduce":  # ring_allreduce_traffic: every chunk twice but the two it ends on
        chunks = [size_bytes // hosts + (1 if i < size_bytes % hosts else 0) for i in range(hosts)]
        total = sum(chunks)
        return tuple((rank, (rank + 1) % hosts, 2 * total - chunks[(rank + 1) % hosts] - chunks[(rank + 2) % hosts])
                     for rank in range(hosts))
    # n - 1 of n equal chunks of the plan's buffer, scaled as collective_traffic scales them
    elements = elements_for(op, 4 * 1024 * hosts, hosts)
    sent = ELEMENT_BYTES * (elements // hosts) * (hosts - 1)
    wire = max(1, round(sent * (size_bytes / (ELEMENT_BYTES * elements))))
    return tuple((rank, (rank + 1) % hosts, wire) for rank in range(hosts))


def schedule_traffic(gpus: Iterable[GpuSchedule], hosts: int) -> tuple[tuple[int, ...], ...]:
    """Bytes per GPU pair in one iteration: the sends, and each collective's own traffic once per
    step and group (optical fabrics plan circuits and wavelengths from this matrix)."""
    matrix = [[0] * hosts for _ in range(hosts)]
    collectives: dict[tuple[str, tuple[int, ...] | None], Collective] = {}
    for gpu in gpus:
        for step in gpu.steps:
            if step.kind == "send":
                matrix[gpu.rank][step.peer or 0] += step.message_bytes()
            elif step.kind == "collective":
                collectives[(step.id, step.group)] = step.collective()
    for coll in collectives.values():
        block = collective_traffic(coll.op, coll.algorithm, len(coll.group), coll.bytes)
        for i, src in enumerate(coll.group):
            for j, dst in enumerate(coll.group):
                matrix[src][dst] += block[i][j]
    return tuple(tuple(row) for row in matrix)

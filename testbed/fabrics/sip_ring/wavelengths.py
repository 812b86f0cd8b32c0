"""Wavelength planning for SiP-Ring: lightpaths on a bidirectional fibre ring, W wavelengths per
segment and direction, reach limited to `reach` hops, wavelengths reused on disjoint segments.
One implementation, shared by the oracle and the controller.

A greedy plan always exists; the integer programme's optimum (SiP-ML's: maximise the slowest pair's
wavelengths per byte under every segment's and every interface's W, testbed.network.link_planner)
replaces it when it does better. Its counts are then given actual wavelengths, first fit, longest
lightpaths first: a count that fits every segment may still find no wavelength free along its
whole path (no conversion)."""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from testbed.model.units import transfer_time_s
from testbed.network.link_planner import longest_s, max_min_links


@dataclass(frozen=True)
class Lightpath:
    src: int
    dst: int
    direction: int  # +1 clockwise, -1 counter-clockwise
    wavelengths: tuple[int, ...]


@dataclass(frozen=True)
class WavelengthPlan:
    lightpaths: dict[tuple[int, int], Lightpath]
    longest_s: float  # longest transfer of the planned demand at this plan's capacities
    bound_s: float  # lower bound: the busiest segment, or a node's interface, at full use
    method: str = "greedy"

    def wavelengths(self, src: int, dst: int) -> int:
        path = self.lightpaths.get((src, dst))
        return len(path.wavelengths) if path else 0


def segments(src: int, dst: int, direction: int, nodes: int) -> list[int]:
    """Segment s joins node s and s+1 (clockwise); a path uses these, in its direction."""
    hops = (dst - src) % nodes if direction > 0 else (src - dst) % nodes
    if direction > 0:
        return [(src + h) % nodes for h in range(hops)]
    return [(src - h - 1) % nodes for h in range(hops)]


def _hops(src: int, dst: int, direction: int, nodes: int) -> int:
    return (dst - src) % nodes if direction > 0 else (src - dst) % nodes


def ring_hops(src: int, dst: int, nodes: int) -> int:
    """Ring segments between two nodes the shorter way round (what reach limits)."""
    return min(_hops(src, dst, 1, nodes), _hops(src, dst, -1, nodes))


def plan_wavelengths(traffic: dict[tuple[int, int], float], nodes: int, wavelengths: int, wavelength_bps: float,
                     reach: int, keep_ring: bool = False, keep: tuple[tuple[int, int], ...] = ()) -> WavelengthPlan:
    """The better of the greedy plan and the programme's optimum (cached: the oracle and the
    dilation sizing plan the same matrices).

    keep_ring first gives every node one wavelength to each ring neighbour, so that any traffic
    the estimate missed can still be relayed hop by hop; `keep` pairs (the job's recurring
    lightpaths) come next, each with one wavelength, before the estimate shares out the rest."""
    return _plan_cached(tuple(sorted(traffic.items())), nodes, wavelengths, wavelength_bps, reach, keep_ring,
                        tuple(keep))


# Re-planning meets hundreds of distinct (rounded) estimates per iteration, and every candidate
# retune threshold meets the same ones again.
@lru_cache(maxsize=8192)
def _plan_cached(traffic_items: tuple[tuple[tuple[int, int], float], ...], nodes: int, wavelengths: int,
                 wavelength_bps: float, reach: int, keep_ring: bool,
                 keep: tuple[tuple[int, int], ...]) -> WavelengthPlan:
    greedy = _greedy(dict(traffic_items), nodes, wavelengths, wavelength_bps, reach, keep_ring, keep)
    # Pairs beyond reach relay whatever the plan: the two plans are compared on the rest.
    demand = {p: size for p, size in traffic_items if size > 0 and p[0] != p[1] and p in greedy.directions}
    if not demand:
        return greedy.plan
    solved = _optimal_counts(demand, greedy, wavelengths)
    if solved is None:
        return greedy.plan
    counts, bound_per_byte = solved
    assigned = _assign(counts, greedy.directions, nodes, wavelengths)
    longest = _longest(demand, assigned, wavelength_bps)
    if bound_per_byte > 0:
        greedy = replace(greedy, plan=replace(greedy.plan, bound_s=max(
            greedy.plan.bound_s, transfer_time_s(1.0, bound_per_byte * wavelength_bps))))
    greedy_longest = _longest(demand, greedy.assigned, wavelength_bps)
    if longest < float("inf") and (longest, -_used(assigned)) < (greedy_longest, -_used(greedy.assigned)):
        lightpaths = {pair: Lightpath(pair[0], pair[1], greedy.directions[pair][0], tuple(w))
                      for pair, w in assigned.items() if w}
        everything = {p: size for p, size in traffic_items if size > 0 and p[0] != p[1]}
        return WavelengthPlan(lightpaths, _longest(everything, assigned, wavelength_bps), greedy.plan.bound_s,
                              "optimal")
    return greedy.plan


def _used(assigned: dict[tuple[int, int], list[int]]) -> int:
    return sum(len(w) for w in assigned.values())


def _longest(demand: dict[tuple[int, int], float], assigned: dict[tuple[int, int], list[int]],
             wavelength_bps: float) -> float:
    return longest_s(demand, {p: len(w) for p, w in assigned.items()}, wavelength_bps)


@dataclass(frozen=True)
class _Greedy:
    plan: WavelengthPlan
    directions: dict[tuple[int, int], tuple[int, list[int]]]  # pair -> (direction, segments) within reach
    assigned: dict[tuple[int, int], list[int]]
    kept: tuple[tuple[int, int], ...]  # ring and keep pairs that got their wavelength


def _optimal_counts(demand: dict[tuple[int, int], float], greedy: _Greedy,
                    wavelengths: int) -> tuple[dict[tuple[int, int], int], float] | None:
    """The shared programme with every fibre segment (per direction) and every interface as a
    capacity group of W, kept pairs keeping one wavelength. Returns the counts and the optimum z
    (per byte, in wavelengths); None when some demand gets no wavelength whatever the plan."""
    pairs = list(greedy.directions)
    index = {p: i for i, p in enumerate(pairs)}
    by_segment: dict[tuple[int, int], list[int]] = defaultdict(list)
    by_end: dict[tuple[int, int], list[int]] = defaultdict(list)
    for pair, (dirn, segs) in greedy.directions.items():
        for seg in segs:
            by_segment[(dirn, seg)].append(index[pair])
        by_end[(0, pair[0])].append(index[pair])
        by_end[(1, pair[1])].append(index[pair])
    kept = set(greedy.kept)
    floor = [1 if pair in kept else 0 for pair in pairs]
    solved = max_min_links(demand, pairs, list(by_segment.values()) + list(by_end.values()), wavelengths,
                           floor=floor, ceiling=wavelengths)
    if solved is None:
        return None
    return solved.counts, solved.bound_per_byte


def _assign(counts: dict[tuple[int, int], int], directions: dict[tuple[int, int], tuple[int, list[int]]],
            nodes: int, wavelengths: int) -> dict[tuple[int, int], list[int]]:
    """Actual wavelengths for the counts, first fit, longest lightpaths first (they have the fewest
    choices); a copy with no wavelength free along its whole path is dropped."""
    full = (1 << wavelengths) - 1
    used: dict[tuple[int, int], int] = defaultdict(int)
    assigned: dict[tuple[int, int], list[int]] = defaultdict(list)
    for pair in sorted(counts, key=lambda p: (-len(directions[p][1]), p)):
        dirn, segs = directions[pair]
        for _ in range(counts[pair]):
            busy = 0
            for seg in segs:
                busy |= used[(dirn, seg)]
            free = full & ~busy
            if not free:
                break
            wave = (free & -free).bit_length() - 1
            for seg in segs:
                used[(dirn, seg)] |= 1 << wave
            assigned[pair].append(wave)
    return dict(assigned)


@dataclass(frozen=True)
class _Base:
    """The greedy's first phase, which no demand changes: one wavelength to each ring neighbour
    (keep_ring) and each kept pair, in order. A controller re-plans from it every period."""
    ring_pairs: tuple[tuple[int, int], ...]
    chosen: dict[tuple[int, int], tuple[int, list[int]]]  # kept pair -> (direction, segments) within reach
    slots: dict[tuple[int, int], list[int]]  # pair -> its segments' places in `used`
    used: tuple[int, ...]  # wavelength bitmask per segment: clockwise 0..n-1, then counter-clockwise
    tx: tuple[int, ...]
    rx: tuple[int, ...]
    assigned: dict[tuple[int, int], tuple[int, ...]]
    lightpaths: dict[tuple[int, int], Lightpath]


def _route(pair: tuple[int, int], nodes: int, reach: int) -> tuple[int, list[int]] | None:
    """A pair's direction (the shorter way, clockwise on a tie) and segments; None beyond reach."""
    s, d = pair
    options = [dirn for dirn in (1, -1) if _hops(s, d, dirn, nodes) <= reach]
    if not options:
        return None
    dirn = min(options, key=lambda o: (_hops(s, d, o, nodes), -o))
    return dirn, segments(s, d, dirn, nodes)


def _places(route: tuple[int, list[int]], nodes: int) -> list[int]:
    return [seg if route[0] > 0 else nodes + seg for seg in route[1]]


class _Fill:
    """Wavelengths handed out one at a time, first fit along a pair's segments (no conversion),
    at most W per interface and direction, on top of the first phase's (`base`, left as it is)."""

    def __init__(self, nodes: int, wavelengths: int, used: Sequence[int], tx: Sequence[int], rx: Sequence[int],
                 slots: dict[tuple[int, int], list[int]], base: dict[tuple[int, int], tuple[int, ...]]) -> None:
        self.wavelengths, self.full = wavelengths, (1 << wavelengths) - 1
        self.used, self.tx, self.rx = list(used), list(tx), list(rx)
        self.slots, self.base = slots, base
        self.grown: dict[tuple[int, int], list[int]] = {}  # pairs given wavelengths here: all of theirs

    def count(self, pair: tuple[int, int]) -> int:
        found = self.grown.get(pair)
        return len(found) if found is not None else len(self.base.get(pair, ()))

    def add(self, pair: tuple[int, int]) -> bool:
        s, d = pair
        if self.tx[s] >= self.wavelengths or self.rx[d] >= self.wavelengths:
            return False
        places, used = self.slots[pair], self.used
        busy = 0
        for place in places:
            busy |= used[place]
        free = self.full & ~busy
        if not free:
            return False
        bit = free & -free
        for place in places:
            used[place] |= bit
        self.tx[s] += 1
        self.rx[d] += 1
        found = self.grown.get(pair)
        if found is None:
            found = self.grown[pair] = list(self.base.get(pair, ()))
        found.append(bit.bit_length() - 1)
        return True

    def assigned(self) -> dict[tuple[int, int], list[int]]:
        """Every pair's wavelengths, the first phase's pairs first, then in the order they got one."""
        out = {pair: list(self.grown.get(pair, w)) for pair, w in self.base.items()}
        out.update((pair, w) for pair, w in self.grown.items() if pair not in self.base)
        return out


@lru_cache(maxsize=64)
def _base(nodes: int, wavelengths: int, reach: int, keep_ring: bool, keep: tuple[tuple[int, int], ...]) -> _Base:
    ring_pairs: list[tuple[int, int]] = []
    if keep_ring and nodes > 1 and wavelengths >= 2:
        ring_pairs = list(dict.fromkeys([(i, (i + 1) % nodes) for i in range(nodes)] +
                                        [((i + 1) % nodes, i) for i in range(nodes)]))
    ring_pairs = list(dict.fromkeys(ring_pairs + [p for p in keep if p[0] != p[1]]))
    chosen = {pair: route for pair in ring_pairs if (route := _route(pair, nodes, reach)) is not None}
    slots = {pair: _places(route, nodes) for pair, route in chosen.items()}
    fill = _Fill(nodes, wavelengths, [0] * (2 * nodes), [0] * nodes, [0] * nodes, slots, {})
    for pair in chosen:
        fill.add(pair)
    lightpaths = {pair: Lightpath(pair[0], pair[1], chosen[pair][0], tuple(w)) for pair, w in fill.grown.items()}
    return _Base(tuple(ring_pairs), chosen, slots, tuple(fill.used), tuple(fill.tx), tuple(fill.rx),
                 {pair: tuple(w) for pair, w in fill.grown.items()}, lightpaths)


def _greedy(traffic: dict[tuple[int, int], float], nodes: int, wavelengths: int, wavelength_bps: float,
            reach: int, keep_ring: bool, keep: tuple[tuple[int, int], ...]) -> _Greedy:
    """Every demand within reach gets one wavelength (heaviest first, shorter direction), then spare
    wavelengths go to the demand with the longest transfer until none fits."""
    base = _base(nodes, wavelengths, reach, keep_ring, keep)
    demand = {pair: size for pair, size in traffic.items() if size > 0 and pair[0] != pair[1]}
    # The demand's pairs first, then the other kept ones (as the plan lists them).
    chosen = {pair: route for pair in demand
              if (route := base.chosen.get(pair) or _route(pair, nodes, reach)) is not None}
    fresh = [pair for pair in chosen if pair not in base.chosen]
    chosen.update(base.chosen)
    slots = dict(base.slots)
    slots.update((pair, _places(chosen[pair], nodes)) for pair in fresh)
    fill = _Fill(nodes, wavelengths, base.used, base.tx, base.rx, slots, base.assigned)
    # Kept pairs got theirs in the first phase, or never will (the fill only grows).
    for pair in sorted(fresh, key=lambda p: -demand[p]):
        fill.add(pair)
    # Spare wavelengths to the longest transfer first; a demand that cannot grow leaves the heap.
    heap = [(-size / held, p) for p, size in demand.items() if (held := fill.count(p))]
    heapq.heapify(heap)
    while heap:
        _, pair = heapq.heappop(heap)
        if fill.add(pair):
            heapq.heappush(heap, (-demand[pair] / fill.count(pair), pair))
    assigned = fill.assigned()
    lightpaths = {pair: (base.lightpaths[pair] if pair not in fill.grown
                         else Lightpath(pair[0], pair[1], chosen[pair][0], tuple(w))) for pair, w in assigned.items()}
    longest = max((transfer_time_s(size, len(w) * wavelength_bps) if (w := assigned.get(p)) else float("inf")
                   for p, size in demand.items()), default=0.0)
    load: dict[tuple[int, int], float] = defaultdict(float)
    node_load: dict[tuple[str, int], float] = defaultdict(float)
    for pair, size in demand.items():
        if pair in chosen:
            dirn, segs = chosen[pair]
            for seg in segs:
                load[(dirn, seg)] += size
        node_load[("tx", pair[0])] += size
        node_load[("rx", pair[1])] += size
    bound = transfer_time_s(max(list(load.values()) + list(node_load.values()), default=0.0),
                            wavelengths * wavelength_bps)
    kept = tuple(p for p in base.ring_pairs if assigned.get(p))
    return _Greedy(WavelengthPlan(lightpaths, longest, bound), chosen, assigned, kept)

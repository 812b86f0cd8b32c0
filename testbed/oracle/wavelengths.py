"""Wavelength planning for SiP-Ring: lightpaths on a bidirectional fibre ring, W wavelengths per
segment and direction, reach limited to `reach` hops, wavelengths reused on disjoint segments.
One implementation, shared by the oracle and the controller."""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass

from testbed.core.units import transfer_time_s


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


def plan_wavelengths(traffic: dict[tuple[int, int], float], nodes: int, wavelengths: int, wavelength_bps: float,
                     reach: int, keep_ring: bool = False, keep: tuple[tuple[int, int], ...] = ()) -> WavelengthPlan:
    """Greedy: every demand within reach gets one wavelength (heaviest first, shorter direction),
    then spare wavelengths go to the demand with the longest transfer until none fits.

    keep_ring first gives every node one wavelength to each ring neighbour, so that any traffic
    the estimate missed can still be relayed hop by hop; `keep` pairs (the job's recurring
    lightpaths) come next, each with one wavelength, before the estimate shares out the rest."""
    full = (1 << wavelengths) - 1
    used: dict[tuple[int, int], int] = defaultdict(int)  # (direction, segment) -> wavelength bitmask
    tx: dict[int, int] = defaultdict(int)
    rx: dict[int, int] = defaultdict(int)
    demand = {pair: size for pair, size in traffic.items() if size > 0 and pair[0] != pair[1]}
    ring_pairs = []
    if keep_ring and nodes > 1 and wavelengths >= 2:
        ring_pairs = list(dict.fromkeys([(i, (i + 1) % nodes) for i in range(nodes)] +
                                        [((i + 1) % nodes, i) for i in range(nodes)]))
    ring_pairs = list(dict.fromkeys(ring_pairs + [p for p in keep if p[0] != p[1]]))
    for pair in ring_pairs:
        demand.setdefault(pair, 0.0)
    chosen: dict[tuple[int, int], tuple[int, list[int]]] = {}
    for (s, d) in demand:
        options = [dirn for dirn in (1, -1) if _hops(s, d, dirn, nodes) <= reach]
        if options:
            dirn = min(options, key=lambda o: (_hops(s, d, o, nodes), -o))
            chosen[(s, d)] = (dirn, segments(s, d, dirn, nodes))
    assigned: dict[tuple[int, int], list[int]] = defaultdict(list)

    def try_add(pair: tuple[int, int]) -> bool:
        s, d = pair
        if tx[s] >= wavelengths or rx[d] >= wavelengths:
            return False
        dirn, segs = chosen[pair]
        busy = 0
        for seg in segs:
            busy |= used[(dirn, seg)]
        free = full & ~busy
        if not free:
            return False
        wave = (free & -free).bit_length() - 1
        for seg in segs:
            used[(dirn, seg)] |= 1 << wave
        tx[s] += 1
        rx[d] += 1
        assigned[pair].append(wave)
        return True

    for pair in ring_pairs:
        if pair in chosen:
            try_add(pair)
    for pair in sorted(chosen, key=lambda p: -demand[p]):
        if not assigned.get(pair):
            try_add(pair)
    # Spare wavelengths to the longest transfer first; a demand that cannot grow leaves the heap.
    heap = [(-demand[p] / len(w), p) for p, w in assigned.items() if demand[p] > 0]
    heapq.heapify(heap)
    while heap:
        _, pair = heapq.heappop(heap)
        if try_add(pair):
            heapq.heappush(heap, (-demand[pair] / len(assigned[pair]), pair))
    lightpaths = {pair: Lightpath(pair[0], pair[1], chosen[pair][0], tuple(w)) for pair, w in assigned.items()}
    longest = max((transfer_time_s(demand[p], len(w) * wavelength_bps) if (w := assigned.get(p)) else float("inf")
                   for p in demand if demand[p] > 0), default=0.0)
    load: dict[tuple[int, int], float] = defaultdict(float)
    for pair, (dirn, segs) in chosen.items():
        for seg in segs:
            load[(dirn, seg)] += demand[pair]
    node_load: dict[tuple[str, int], float] = defaultdict(float)
    for (s, d), size in demand.items():
        node_load[("tx", s)] += size
        node_load[("rx", d)] += size
    bound = transfer_time_s(max(list(load.values()) + list(node_load.values()), default=0.0),
                            wavelengths * wavelength_bps)
    return WavelengthPlan(lightpaths, longest, bound)

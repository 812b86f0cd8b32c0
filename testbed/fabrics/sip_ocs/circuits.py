"""Circuit planning for SiP-OCS: how many circuits each ordered GPU pair gets from Q optical
switches, and which switch carries each circuit. One implementation, shared by the oracle and the
controller.

An OCS connects input (transmit) port i to output (receive) port j, so a circuit is directed and
every switch realises a partial permutation; each GPU has one transmit and one receive port per
switch. Planned circuits therefore form a bipartite multigraph of degree at most Q, which König's
theorem lets us split exactly over the Q switches."""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

import networkx as nx

from testbed.model.units import transfer_time_s
from testbed.network.link_planner import longest_s, max_min_links, quantised, worth_retuning

Pair = tuple[int, int]  # (source GPU, destination GPU)
Demand = dict[Pair, float]  # bytes per pair
Circuits = dict[Pair, int]  # circuits per pair
SwitchesOf = dict[Pair, tuple[int, ...]]  # the OCS of each of a pair's circuits

@dataclass(frozen=True)
class CircuitPlan:
    """circuits[(i, j)]: circuits from GPU i to GPU j; switch_of lists, per ordered pair, the OCS
    index of each of its circuits. `bound_s` is the programme's optimum, a lower bound on the
    longest transfer, and `longest_s` what this plan achieves."""

    circuits: Circuits
    switch_of: dict[tuple[int, int], tuple[int, ...]]
    method: str
    longest_s: float
    bound_s: float

    def degree(self, node: int) -> int:
        """Ports in use at `node`: the larger of its transmit and receive counts."""
        out = sum(c for (i, _), c in self.circuits.items() if i == node)
        into = sum(c for (_, j), c in self.circuits.items() if j == node)
        return max(out, into)


def _pair_demand(traffic: Demand) -> Demand:
    return {pair: size for pair, size in traffic.items() if pair[0] != pair[1] and size > 0}


def _longest(demand: Demand, circuits: Circuits, link_bps: float) -> float:
    return longest_s(demand, circuits, link_bps)


def _greedy(demand: Demand, ports: int, link_bps: float, nodes: int, start: Circuits | None = None) -> Circuits:
    """One circuit per pair, heaviest first while ports last; then spare ports to the pair whose
    transfer is longest. `start`: circuits placed first (a ring that keeps everyone reachable)."""
    tx: dict[int, int] = defaultdict(lambda: ports)
    rx: dict[int, int] = defaultdict(lambda: ports)
    circuits: Circuits = dict(start or {})
    for (i, j), count in circuits.items():
        tx[i] -= count
        rx[j] -= count
    for pair in sorted(demand, key=lambda p: -demand[p]):
        if pair in circuits:
            continue
        i, j = pair
        if tx[i] and rx[j]:
            circuits[pair] = 1
            tx[i] -= 1
            rx[j] -= 1
    # Spare ports one at a time to the pair with the most bytes per circuit (the first such pair in
    # `circuits` on a tie), kept in a heap: only the pair given a circuit changes its key, and a
    # pair whose ports ran out never gets one again (a scan of every pair per port took minutes at
    # thousands of GPUs).
    heap = [(-demand.get(pair, 0.0) / circuits[pair], order, pair) for order, pair in enumerate(circuits)]
    heapq.heapify(heap)
    while heap:
        _, order, pair = heapq.heappop(heap)
        if not (tx[pair[0]] and rx[pair[1]]):
            continue
        circuits[pair] += 1
        tx[pair[0]] -= 1
        rx[pair[1]] -= 1
        heapq.heappush(heap, (-demand.get(pair, 0.0) / circuits[pair], order, pair))
    return circuits


def _reaches(demand: Demand, circuits: Circuits, both_ways: bool = True) -> bool:
    """Whether every pair with demand reaches its destination over the circuits, relaying, and
    (`both_ways`) back: TCP's acknowledgements take the reverse path. A group planned with its DP
    ring also reaches back through the other groups, which this plan does not see."""
    graph = nx.DiGraph([pair for pair, count in circuits.items() if count > 0 and pair[0] != pair[1]])
    graph.add_nodes_from(n for pair in demand for n in pair)
    condensed = nx.condensation(graph)  # one node per strongly connected component
    component = condensed.graph["mapping"]
    apart = {(component[a], component[b]) for i, j in demand for a, b in ((i, j), (j, i))[:2 if both_ways else 1]
             if component[a] != component[b]}
    return all(b in nx.descendants(condensed, a) for a, b in apart)


def _ring_first(demand: Demand, ports: int, link_bps: float, nodes: int) -> Circuits:
    """A ring through every GPU with demand (one port each), then the greedy on the rest: where the
    heaviest pairs took every port and left some GPUs unreachable, all reach all by relaying."""
    order = sorted({n for pair in demand for n in pair})
    ring = {(a, b): 1 for a, b in zip(order, order[1:] + order[:1]) if a != b}
    return _greedy(demand, ports, link_bps, nodes, start=ring)


def _optimal(demand: Demand, ports: int, link_bps: float, nodes: int) -> tuple[Circuits, float] | None:
    """The shared programme with every GPU's transmit and receive ports as its capacity groups.
    Returns circuits and the optimum's longest transfer (no plan is faster); None when some pair
    gets no circuit whatever the plan."""
    pairs = list(demand)
    by_port: dict[tuple[int, int], list[int]] = defaultdict(list)  # (node, end) -> its pairs
    for idx, pair in enumerate(pairs):
        by_port[(pair[0], 0)].append(idx)
        by_port[(pair[1], 1)].append(idx)
    groups = [by_port[(node, end)] for node in range(nodes) for end in (0, 1) if (node, end) in by_port]
    solved = max_min_links(demand, pairs, groups, ports)
    if solved is None:
        return None
    bound_s = transfer_time_s(solved.scale, solved.bound_z * link_bps) if solved.bound_z > 0 else float("inf")
    return solved.counts, bound_s


def _assign_switches(circuits: Circuits, switches: int, keep: SwitchesOf | None = None) -> SwitchesOf:
    """Colour the bipartite circuit multigraph (transmit side, receive side) with the switches as
    colours, so that each switch joins every port at most once. With degree ≤ Q an exact colouring
    exists (König); alternating-path swaps find it, starting from any proper partial colouring.
    `keep` (a plan in force) starts it: a circuit that stays stays on its switch where it can, as
    moving it would darken two ports for nothing."""
    at_tx: dict[int, dict[int, int]] = defaultdict(dict)  # node -> switch -> receiving node
    at_rx: dict[int, dict[int, int]] = defaultdict(dict)  # node -> switch -> transmitting node
    remaining = dict(circuits)
    for (i, j), kept in sorted((keep or {}).items()):
        for q in kept[:remaining.get((i, j), 0)]:
            if q < switches and q not in at_tx[i] and q not in at_rx[j]:
                at_tx[i][q], at_rx[j][q] = j, i
                remaining[(i, j)] -= 1
    for (i, j), count in sorted(remaining.items()):
        for _ in range(count):
            a = next(q for q in range(switches) if q not in at_tx[i])
            b = next(q for q in range(switches) if q not in at_rx[j])
            if a not in at_rx[j]:
                b = a
            else:
                # Swap colours a and b along the alternating path from j's receive side.
                path, side, node, colour = [], "rx", j, a
                while True:
                    edges = at_rx if side == "rx" else at_tx
                    if colour not in edges[node]:
                        break
                    other = edges[node][colour]
                    path.append((node, other, side, colour))
                    side = "tx" if side == "rx" else "rx"
                    node, colour = other, (b if colour == a else a)
                for node, other, side, colour in path:
                    if side == "rx":
                        del at_rx[node][colour]
                        del at_tx[other][colour]
                    else:
                        del at_tx[node][colour]
                        del at_rx[other][colour]
                for node, other, side, colour in path:
                    swapped = b if colour == a else a
                    if side == "rx":
                        at_rx[node][swapped], at_tx[other][swapped] = other, node
                    else:
                        at_tx[node][swapped], at_rx[other][swapped] = other, node
                b = a
            at_tx[i][b], at_rx[j][b] = j, i
    switch_of: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, by_switch in at_tx.items():
        for q, j in by_switch.items():
            switch_of[(i, j)].append(q)
    return {pair: tuple(sorted(qs)) for pair, qs in switch_of.items()}


def plan_circuits(traffic: Demand, nodes: int, switches: int, link_bps: float,
                  reserved_ports: int = 0, ring_demand: dict[int, float] | None = None) -> CircuitPlan:
    """Circuits for one traffic matrix on `switches` OCSes with `link_bps` per circuit; each GPU
    keeps `reserved_ports` ports for other uses. Plans are cached: a run plans the same matrix for
    its prediction and for sizing its dilation, and re-plans meet the same estimates again.

    `ring_demand` (bytes per GPU) plans a ring through identical copies of this group, the DP ring
    between counterparts: GPU g sends to g in the next copy and receives from g in the previous
    one, so its circuits take g's transmit and g's receive ports, as a pair (g, g) does here."""
    rings = tuple(sorted((ring_demand or {}).items()))
    return _plan_cached(tuple(sorted(traffic.items())), nodes, switches, link_bps, reserved_ports, rings)


@lru_cache(maxsize=8192)  # as sip_ring.wavelengths: re-plans meet many estimates, again per threshold
def _plan_cached(traffic_items: tuple[tuple[Pair, float], ...], nodes: int, switches: int, link_bps: float,
                 reserved_ports: int, rings: tuple[tuple[int, float], ...] = ()) -> CircuitPlan:
    traffic = dict(traffic_items)
    ports = switches - reserved_ports
    demand = _pair_demand(traffic)
    demand.update({(g, g): size for g, size in rings if size > 0})
    if not demand or ports <= 0:
        return CircuitPlan({}, {}, "none", 0.0 if not demand else float("inf"), 0.0)
    greedy = _greedy(demand, ports, link_bps, nodes)
    best, method, bound = greedy, "greedy", 0.0
    # With more pairs than ports some pair gets no circuit whatever the plan: the greedy then
    # serves the heaviest pairs and leaves the rest to relays.
    solved = _optimal(demand, ports, link_bps, nodes)
    if solved is not None:
        circuits, bound = solved
        if _longest(demand, circuits, link_bps) <= _longest(demand, greedy, link_bps):
            best, method = circuits, "optimal"
    if not _reaches(demand, best, both_ways=not rings):
        best, method = _ring_first(demand, ports, link_bps, nodes), method + " with a ring that keeps all reachable"
    switch_of = _assign_switches(best, switches)
    final = {pair: len(qs) for pair, qs in switch_of.items()}
    return CircuitPlan(final, switch_of, method, _longest(demand, final, link_bps), bound)


def replan_circuits(traffic: Demand, nodes: int, switches: int, link_bps: float,
                    current: SwitchesOf, dark_s: float) -> CircuitPlan:
    """A multi-shot re-plan from a plan in force (`current`: the switches of each pair's circuits):
    it retunes only when worth the dark time (testbed.network.link_planner), and then keeps every circuit it can on
    its switch. Re-planning on each period's measured traffic made 42-49 retunes in one iteration
    that a steady plan served as well. The measured `traffic` is planned as link_planner rounds it."""
    traffic = quantised(traffic)
    fresh = plan_circuits(traffic, nodes, switches, link_bps)
    held = {pair: len(qs) for pair, qs in current.items() if qs and pair[0] != pair[1]}
    demand = _pair_demand(traffic)
    if not worth_retuning(demand, held, fresh.circuits, link_bps, dark_s):
        return CircuitPlan(held, {pair: current[pair] for pair in held}, "kept", _longest(demand, held, link_bps),
                           fresh.bound_s)
    switch_of = _assign_switches(fresh.circuits, switches, keep=current)
    return CircuitPlan(fresh.circuits, switch_of, fresh.method, fresh.longest_s, fresh.bound_s)

"""Circuit planning for SiP-OCS: how many circuits each GPU pair gets from Q optical switches, and
which switch carries each circuit. One implementation, shared by the oracle and the controller."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

MILP_MAX_PAIRS = 400  # above this, the greedy planner (exact MILPs get slow)
MILP_TIME_LIMIT_S = 10.0


@dataclass(frozen=True)
class CircuitPlan:
    """circuits[(i, j)] (i < j): bidirectional circuits between GPUs i and j; switch_of lists, per
    pair, the OCS index of each of its circuits. `bound_s` is the MILP's lower bound on the
    longest transfer, and `longest_s` what this plan achieves."""

    circuits: dict[tuple[int, int], int]
    switch_of: dict[tuple[int, int], tuple[int, ...]]
    method: str
    longest_s: float
    bound_s: float

    def degree(self, node: int) -> int:
        return sum(c for (i, j), c in self.circuits.items() if node in (i, j))


def _pair_demand(traffic: dict[tuple[int, int], float]) -> dict[tuple[int, int], float]:
    """Bytes per unordered pair, the heavier direction (a circuit carries both directions at once)."""
    demand: dict[tuple[int, int], float] = defaultdict(float)
    for (s, d), size in traffic.items():
        if s != d and size > 0:
            key = (min(s, d), max(s, d))
            demand[key] = max(demand[key], size)
    return dict(demand)


def _longest(demand, circuits, link_bps) -> float:
    return max((demand[p] * 8 / (circuits.get(p, 0) * link_bps) if circuits.get(p, 0) else float("inf")
                for p in demand), default=0.0)


def _greedy(demand, ports: int, link_bps: float, nodes: int) -> dict[tuple[int, int], int]:
    """One circuit per pair, heaviest first while ports last; then spare ports to the pair whose
    transfer is longest."""
    free = defaultdict(lambda: ports)
    circuits: dict[tuple[int, int], int] = {}
    for pair in sorted(demand, key=lambda p: -demand[p]):
        i, j = pair
        if free[i] and free[j]:
            circuits[pair] = 1
            free[i] -= 1
            free[j] -= 1
    while True:
        options = [p for p in circuits if free[p[0]] and free[p[1]]]
        if not options:
            return circuits
        pair = max(options, key=lambda p: demand[p] / circuits[p])
        circuits[pair] += 1
        free[pair[0]] -= 1
        free[pair[1]] -= 1


def _milp(demand, ports: int, link_bps: float, nodes: int) -> tuple[dict[tuple[int, int], int], float] | None:
    """Maximise z (the slowest pair's rate per byte) subject to per-GPU port counts: the ILP of
    SiP-ML §A.2 in linear form. Returns circuits and the LP bound on the longest transfer."""
    pairs = list(demand)
    n = len(pairs)
    # variables: c_0..c_{n-1} (integer circuits), z (continuous)
    cost = np.zeros(n + 1)
    cost[n] = -1.0
    rows, lower, upper = [], [], []
    scale = max(demand.values())
    for idx, pair in enumerate(pairs):  # c_p·link ≥ z·demand_p  →  c_p − z·demand_p/(scale) ≥ 0
        row = np.zeros(n + 1)
        row[idx] = 1.0
        row[n] = -demand[pair] / scale
        rows.append(row)
        lower.append(0.0)
        upper.append(np.inf)
    for node in range(nodes):
        row = np.zeros(n + 1)
        for idx, (i, j) in enumerate(pairs):
            if node in (i, j):
                row[idx] = 1.0
        if row.any():
            rows.append(row)
            lower.append(0.0)
            upper.append(ports)
    integrality = np.ones(n + 1)
    integrality[n] = 0
    result = milp(cost, constraints=LinearConstraint(np.array(rows), lower, upper), integrality=integrality,
                  bounds=Bounds(np.zeros(n + 1), np.full(n + 1, np.inf)),
                  options={"time_limit": MILP_TIME_LIMIT_S})
    if result.x is None:
        return None
    circuits = {pair: int(round(result.x[idx])) for idx, pair in enumerate(pairs) if round(result.x[idx]) > 0}
    bound_z = -result.mip_dual_bound if result.mip_dual_bound is not None else result.x[n]
    bound_s = scale * 8 / (bound_z * link_bps) if bound_z > 0 else float("inf")
    return circuits, bound_s


def _assign_switches(circuits: dict[tuple[int, int], int], switches: int) -> dict[tuple[int, int], tuple[int, ...]]:
    """Each OCS joins disjoint port pairs: colour the circuit multigraph greedily with Q colours;
    a circuit that finds no free switch is dropped (its traffic is relayed)."""
    used: dict[int, set[int]] = defaultdict(set)  # node -> switches whose port is taken
    switch_of: dict[tuple[int, int], list[int]] = defaultdict(list)
    for pair in sorted(circuits, key=lambda p: -circuits[p]):
        i, j = pair
        for _ in range(circuits[pair]):
            free = [q for q in range(switches) if q not in used[i] and q not in used[j]]
            if not free:
                break
            used[i].add(free[0])
            used[j].add(free[0])
            switch_of[pair].append(free[0])
    return {pair: tuple(qs) for pair, qs in switch_of.items()}


def plan_circuits(traffic: dict[tuple[int, int], float], nodes: int, switches: int, link_bps: float,
                  reserved_ports: int = 0) -> CircuitPlan:
    """Circuits for one traffic matrix on `switches` OCSes with `link_bps` per circuit; each GPU
    keeps `reserved_ports` ports for other uses (the DP ring)."""
    ports = switches - reserved_ports
    demand = _pair_demand(traffic)
    if not demand or ports <= 0:
        return CircuitPlan({}, {}, "none", 0.0 if not demand else float("inf"), 0.0)
    greedy = _greedy(demand, ports, link_bps, nodes)
    best, method, bound = greedy, "greedy", 0.0
    if len(demand) <= MILP_MAX_PAIRS:
        solved = _milp(demand, ports, link_bps, nodes)
        if solved is not None:
            circuits, bound = solved
            if _longest(demand, circuits, link_bps) <= _longest(demand, greedy, link_bps):
                best, method = circuits, "milp"
    switch_of = _assign_switches(best, switches)
    final = {pair: len(qs) for pair, qs in switch_of.items()}
    return CircuitPlan(final, switch_of, method, _longest(demand, final, link_bps), bound)

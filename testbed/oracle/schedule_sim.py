"""Oracle for any schedule (testbed-schedule/1): every GPU runs its steps in order, transfers share
the fabric max-min fairly, collectives take their alpha-beta time once all members arrive, at the
rate their ring gets on the fabric's plan."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from testbed.core.errors import InputError
from testbed.core.scenario import Fabric
from testbed.core.schedule import collective_traffic, traffic_pairs
from testbed.core.units import bytes_to_bits, us_to_s
from testbed.oracle.collectives import Breakdown, Prediction, collective_cost
from testbed.oracle.fabrics import mp_flow_model
from testbed.oracle.flow_model import FlowModel
from testbed.oracle.flows import Flow, max_min_rates


def simulate_schedule(schedule: dict[str, Any], fabric: Fabric) -> Prediction:
    n = int(schedule["hosts"])
    if n != fabric.hosts:
        raise InputError(f"the schedule has {n} GPUs but fabric.hosts is {fabric.hosts}; they must match")
    traffic = traffic_pairs(schedule.get("traffic_matrix_bytes"))
    model = mp_flow_model(fabric, n, 1, traffic)
    alpha = us_to_s(fabric.latency_us)
    steps = [gpu["steps"] for gpu in sorted(schedule["gpus"], key=lambda g: g["rank"])]
    ring_rate = collective_rates_bps(steps, model)
    position = [0] * n
    busy_until = [0.0] * n
    compute = [0.0] * n
    arrived: dict[str, float] = {}
    flows: list[tuple[str, Flow, float]] = []  # (tag, flow, bits left)
    waiting_collective: dict[tuple[Any, ...], set[int]] = defaultdict(set)
    now = 0.0

    def advance(g: int) -> None:
        while position[g] < len(steps[g]) and busy_until[g] <= now:
            step = steps[g][position[g]]
            kind = step["kind"]
            if kind == "compute":
                duration = us_to_s(step["compute_us"])
                busy_until[g] = now + duration
                compute[g] += duration
            elif kind == "send":
                flows.append((step["tag"], Flow(now, step["bytes"], model.resources(g, step["peer"])),
                              bytes_to_bits(step["bytes"])))
            elif kind == "recv":
                if arrived.get(step["tag"], math.inf) > now:
                    return
            elif kind == "collective":
                group = tuple(step["group"])
                key = (step["id"], group)
                waiting_collective[key].add(g)
                if len(waiting_collective[key]) < len(group):
                    position[g] += 1
                    busy_until[g] = math.inf  # released when the last member arrives
                    return
                duration = 0.0 if len(group) < 2 else collective_cost(
                    step["op"], step["algorithm"], len(group), step["bytes"], ring_rate[key], alpha).time_s
                for member in group:
                    busy_until[member] = now + duration
            else:
                raise InputError(f"schedule step {step.get('id')} has unknown kind {kind}")
            position[g] += 1

    while True:
        for g in range(n):
            advance(g)
        if all(p >= len(s) for p, s in zip(position, steps)) and not flows:
            break
        rates = max_min_rates([f for _, f, _ in flows], model.capacity_bps) if flows else []
        candidates = [t for t in busy_until if now < t < math.inf]
        candidates += [now + left / r for (_, _, left), r in zip(flows, rates) if r > 0]
        candidates += [t for t in arrived.values() if t > now]
        if not candidates:
            stuck = [g for g in range(n) if position[g] < len(steps[g])]
            raise InputError(f"the schedule deadlocks: GPU {stuck[0]} waits at step "
                             f"{steps[stuck[0]][position[stuck[0]]]['id']} forever")
        then = min(candidates)
        still = []
        for (tag, flow, left), rate in zip(flows, rates):
            left -= rate * (then - now)
            if left <= 1e-6 * max(1.0, flow.bytes):
                arrived[tag] = then + alpha
            else:
                still.append((tag, flow, left))
        flows = still
        now = then
    total = max([now] + [t for t in busy_until if t < math.inf])
    busiest = max(compute)
    return Prediction(total, Breakdown(compute_s=busiest, communication_s=total - busiest),
                      "schedule simulation: steps in order, max-min fair transfers, alpha-beta collectives")


def collective_rates_bps(steps: list[list[dict[str, Any]]], model: FlowModel) -> dict[tuple[Any, ...], float]:
    """Per collective `(step id, group)`: the rate of its slowest ring edge when every group that
    runs the same step (the DP groups of all MP ranks) sends to its successor at once, shared
    max-min fairly over the fabric's plan (uplinks, circuits, lightpaths and their relays)."""
    concurrent: dict[str, dict[tuple[int, ...], dict[str, Any]]] = defaultdict(dict)
    for gpu_steps in steps:
        for step in gpu_steps:
            if step["kind"] == "collective" and len(step["group"]) > 1:
                concurrent[step["id"]][tuple(step["group"])] = step
    rates: dict[tuple[Any, ...], float] = {}
    for ident, groups in concurrent.items():
        edges = [(group, a, b) for group, step in sorted(groups.items()) for a, b in _edges(model, group, step)]
        shares = max_min_rates([Flow(0.0, 1.0, model.resources(a, b)) for _, a, b in edges], model.capacity_bps)
        for (group, _, _), share in zip(edges, shares):
            rates[(ident, group)] = min(rates.get((ident, group), math.inf), share)
    return rates


def _edges(model: FlowModel, group: tuple[int, ...], step: dict[str, Any]) -> list[tuple[int, int]]:
    """The ring of the group where the plan routes it; else (a tree on a circuit plan made for its
    own pairs) the pairs the collective's algorithm actually uses."""
    ring = list(zip(group, group[1:] + group[:1]))
    if model.default is not None or all(pair in model.paths for pair in ring):
        return ring
    block = collective_traffic(step["op"], step["algorithm"], len(group), step["bytes"])
    return [(group[i], group[j]) for i, row in enumerate(block) for j, size in enumerate(row) if size and i != j]

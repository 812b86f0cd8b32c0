"""Iteration time of a plan on a fabric: the MP group's critical path, transfers sharing the fabric
max-min fairly, then the DP all-reduce."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from testbed.fabrics.sip_ring import ring_flow_model, ring_plan
from testbed.oracle.collectives import Breakdown, Prediction
from testbed.oracle.fabrics import dp_allreduce_s, mp_flow_model
from testbed.oracle.flow_model import FlowModel
from testbed.oracle.flows import Flow, Resource, completion_times
from testbed.placer.plan import Plan
from testbed.scenario import Fabric
from testbed.topology import reconfig_us
from testbed.units import us_to_s


class _RingController:
    """SiP-Ring's control loop inside the oracle: every estimation period the wavelengths are
    re-planned from the traffic of the period before, and a lightpath whose wavelengths changed
    carries nothing until the retuning (reconfig_us) is over."""

    def __init__(self, fabric: Fabric, k: int, steady: FlowModel, recurring: tuple[tuple[int, int], ...]) -> None:
        self.fabric, self.k, self.recurring = fabric, k, recurring
        self._plans: dict[frozenset[tuple[tuple[int, int], int]], FlowModel] = {}
        self.period_s = us_to_s(fabric.estimate_period_us)
        self.dark_s = us_to_s(reconfig_us(fabric))
        self.model = steady  # the plan of the iteration's traffic: where the previous iteration ended
        self.window = 0
        self.traffic: dict[int, dict[tuple[int, int], float]] = {}
        self.changed: set[Resource] = set()
        self.changed_until = 0.0
        self.dark_total_s = 0.0

    def before_phase(self, pairs: dict[tuple[int, int], tuple[float, float]]
                     ) -> tuple[FlowModel, Callable[[tuple[Resource, ...]], float]]:
        start = min(s for s, _ in pairs.values())
        window = int(start // self.period_s)
        if window > self.window:
            last = self.traffic.get(window - 1)
            if last:
                # Layers repeat, and so do their periods' traffic: plan each distinct estimate once.
                key = frozenset((pair, round(math.log2(size))) for pair, size in last.items() if size > 0)
                model = self._plans.get(key)
                if model is None:
                    model = ring_flow_model(self.fabric, self.k, ring_plan(self.fabric, self.k, last, self.recurring))
                    self._plans[key] = model
                self.changed = {r for r in set(model.capacity_bps) | set(self.model.capacity_bps)
                                if model.capacity_bps.get(r) != self.model.capacity_bps.get(r)}
                if self.changed:
                    self.changed_until = window * self.period_s + self.dark_s
                    self.dark_total_s += self.dark_s
                self.model = model
            self.window = window
        for (src, dst), (begin, size) in pairs.items():
            bucket = self.traffic.setdefault(int(begin // self.period_s), {})
            bucket[(src, dst)] = bucket.get((src, dst), 0.0) + size

        def ready(resources: tuple[Resource, ...]) -> float:
            return self.changed_until if any(r in self.changed for r in resources) else 0.0

        return self.model, ready


def dp_ring_bytes(plan: Plan) -> float:
    """What each GPU sends in its DP ring all-reduce: 2(l−1)/l of the largest gradient shard."""
    return 2 * (plan.l - 1) / plan.l * max(plan.grad_bytes) if plan.l > 1 else 0.0


def mp_makespan_s(plan: Plan, fabric: Fabric) -> tuple[float, FlowModel]:
    """Critical path of one MP group. The transfers feeding one op share the fabric max-min fairly,
    one flow per GPU pair; transfers feeding different ops do not interact."""
    placement = plan.placement
    ops = placement.ops
    model = mp_flow_model(fabric, plan.k, plan.l, plan.mp_traffic, dp_ring_bytes(plan))
    ring = _RingController(fabric, plan.k, model, tuple(sorted(plan.mp_traffic))) if fabric.kind == "sip-ring" else None
    alpha = us_to_s(fabric.latency_us)
    by_consumer: dict[int, list[tuple[tuple[int, int, int, int], float]]] = defaultdict(list)
    for key, size in plan.messages.items():
        by_consumer[key[2]].append((key, size))
    avail = [0.0] * plan.k
    end = [[0.0] * op.parts for op in ops]
    for i, op in enumerate(ops):
        arrived: dict[tuple[int, int, int, int], float] = {}
        incoming = by_consumer.get(i, [])
        if incoming:
            # One flow per GPU pair (one connection, messages in order): it starts with the first
            # producer to finish and carries all of the pair's bytes for this op.
            pairs: dict[tuple[int, int], list[Any]] = {}  # [first ready, bytes, producers]
            for key, size in incoming:
                q, p, _, dst = key
                pair = pairs.setdefault((placement.gpu[q][p], dst), [float("inf"), 0.0, []])
                pair[0] = min(pair[0], end[q][p])
                pair[1] += size
                pair[2].append(key)
            if ring is not None:
                model, ready_at = ring.before_phase({pair: (start, size) for pair, (start, size, _) in pairs.items()})
                flows = [Flow(max(start, ready_at(model.resources(*pair))), size, model.resources(*pair))
                         for pair, (start, size, _) in pairs.items()]
            else:
                flows = [Flow(start, size, model.resources(*pair)) for pair, (start, size, _) in pairs.items()]
            for (start, _, keys), done in zip(pairs.values(), completion_times(flows, model.capacity_bps)):
                for key in keys:
                    arrived[key] = max(done, end[key[0]][key[1]]) + alpha
        gpus = placement.gpu
        for c in range(op.parts):
            g = gpus[i][c]
            ready = 0.0
            for q, p in plan.needs[i][c]:
                ready = max(ready, end[q][p] if gpus[q][p] == g else arrived[(q, p, i, g)])
            start = max(ready, avail[g])
            end[i][c] = avail[g] = start + us_to_s(op.part_us)
    if ring is not None:
        model.dark_s = ring.dark_total_s
    return max(avail), model


def predict_plan(plan: Plan, fabric: Fabric) -> Prediction:
    mp_s, model = mp_makespan_s(plan, fabric)
    notes = model.notes
    dp_s = dp_allreduce_s(fabric, plan.k, plan.l, max(plan.grad_bytes), model.dp_rate_bps)
    busiest = [0.0] * plan.k
    for i, op in enumerate(plan.placement.ops):
        for c in range(op.parts):
            busiest[plan.placement.gpu[i][c]] += us_to_s(op.part_us)
    compute = max(busiest)
    total = mp_s + dp_s
    formula = f"MP critical path {mp_s * 1e3:.3f} ms + DP all-reduce {dp_s * 1e3:.3f} ms"
    if notes:
        formula += "; " + "; ".join(notes)
    dark = min(getattr(model, "dark_s", 0.0), max(0.0, total - compute))
    return Prediction(total, Breakdown(compute_s=compute, communication_s=total - compute - dark,
                                       reconfiguration_s=dark), formula)

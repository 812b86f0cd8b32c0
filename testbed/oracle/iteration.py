"""Iteration time of a plan on a fabric: the MP group's critical path, transfers sharing the fabric
max-min fairly, then the DP all-reduce."""

from __future__ import annotations

from collections import defaultdict

from testbed.oracle.fabrics import FlowModel, dp_allreduce_s, mp_flow_model
from testbed.oracle.flows import Flow, completion_times
from testbed.placer.plan import Plan
from testbed.predict import Breakdown, Prediction
from testbed.scenario import Fabric
from testbed.units import us_to_s


def mp_makespan_s(plan: Plan, fabric: Fabric) -> tuple[float, FlowModel]:
    """Critical path of one MP group. The transfers feeding one op share the fabric max-min fairly,
    one flow per GPU pair; transfers feeding different ops do not interact."""
    placement = plan.placement
    ops = placement.ops
    dp_bytes = 2 * (plan.l - 1) / plan.l * max(plan.grad_bytes) if plan.l > 1 else 0.0
    model = mp_flow_model(fabric, plan.k, plan.l, plan.mp_traffic, dp_bytes)
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
            pairs: dict[tuple[int, int], list] = {}
            for key, size in incoming:
                q, p, _, dst = key
                pair = pairs.setdefault((placement.gpu[q][p], dst), [float("inf"), 0.0, []])
                pair[0] = min(pair[0], end[q][p])
                pair[1] += size
                pair[2].append(key)
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
    return Prediction(total, Breakdown(compute_s=compute, communication_s=total - compute), formula)

"""Iteration time of a plan on a fabric: the MP group's critical path, transfers sharing the fabric
max-min fairly, and the DP all-reduce in gradient buckets that start as the backward fills them."""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import replace
from typing import Any

from testbed.model.fabric_section import FabricSection
from testbed.model.units import us_to_s
from testbed.network.collectives import Breakdown, Prediction
from testbed.network.flow_model import FlowModel
from testbed.network.flows import DarkWindow, Flow, RatesMemo, Resource, completion_times
from testbed.oracle.fabrics import dp_allreduce_s, dp_load, mp_flow_model
from testbed.oracle.replanning import PeriodTraffic, period_traffic, plan_replans, replans_during_run
from testbed.placer.buckets import Bucket, fusion_candidates_bytes, merge_buckets, overlapped_finish_s
from testbed.placer.plan import Plan


def dp_ring_bytes(plan: Plan) -> float:
    """What each GPU sends in its DP ring all-reduce: 2(l−1)/l of the largest gradient shard."""
    return 2 * (plan.l - 1) / plan.l * max(plan.grad_bytes) if plan.l > 1 else 0.0


Ends = list[list[float]]  # ends[op][part]: when that sub-op finished, in seconds


def mp_makespan_s(plan: Plan, fabric: FabricSection, model: FlowModel,
                  enough_s: float = float("inf")) -> tuple[float, FlowModel, Ends]:
    """Critical path of one MP group. The transfers feeding one op share the fabric max-min fairly,
    one flow per GPU pair; transfers feeding different ops do not interact. On a fabric whose
    controller re-plans during the run, the dark windows of testbed.oracle.replanning pause them.
    A run without dark time is a lower bound: once it reaches `enough_s` that bound is returned."""
    memo: RatesMemo = {}
    if not replans_during_run(fabric):
        makespan, ends = _critical_path_s(plan, fabric, model, (), memo)
        return makespan, model, ends
    traffic = period_traffic(fabric)
    steady_s, ends = _critical_path_s(plan, fabric, model, (), memo, traffic)
    if steady_s >= enough_s:
        model.notes.append("dark time not computed: the run without it already exceeds the best candidate")
        return steady_s, model, ends
    replans = plan_replans(fabric, plan.k, plan.l, model, traffic, tuple(sorted(plan.mp_traffic)))
    makespan = steady_s
    if replans.dark_s > 0:
        makespan, ends = _critical_path_s(plan, fabric, model, replans.windows, memo)
    # Pausing a flow leaves its share to others, and max-min sharing freezes within 1%: a paused
    # run can come out a hair faster than the steady one, which dark time cannot really buy.
    makespan = max(makespan, steady_s)
    model.dark_s = replans.dark_before_s(makespan)
    model.notes.append(f"re-planned every {replans.period_s * 1e6:g} µs: {len(replans.windows)} of "
                       f"{replans.count} re-plans retuned links, {model.dark_s * 1e3:.3f} ms dark")
    return makespan, model, ends


def _critical_path_s(plan: Plan, fabric: FabricSection, model: FlowModel, dark: tuple[DarkWindow, ...],
                     memo: RatesMemo, traffic: PeriodTraffic | None = None) -> tuple[float, Ends]:
    """The schedule's makespan over `model`, flows paused in the `dark` windows; records what each
    pair starts sending per period into `traffic`."""
    placement = plan.placement
    ops = placement.ops
    alpha = us_to_s(fabric.latency_us)
    window_ends = [w.end_s for w in dark]
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
            if traffic is not None:
                for pair_key, (start, size, _) in pairs.items():
                    traffic.add(pair_key, start, size)
            flows = [Flow(start, size, model.resources(*pair)) for pair, (start, size, _) in pairs.items()]
            # Windows come in order of their start and are equally long: skip those already over.
            first = min(flow.start_s for flow in flows)
            current = dark[bisect.bisect_right(window_ends, first):] if dark else ()
            finished = completion_times(flows, model.capacity_bps, current, memo)
            for (start, _, keys), done in zip(pairs.values(), finished):
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
    return max(avail), end


def beside_dp(model: FlowModel, load: dict[Resource, float], mp_s: float) -> FlowModel:
    """The MP group's flow model with the links it shares with the DP ring (`load`: the ring's bytes
    on each) reduced by the ring's average rate over the MP critical path `mp_s`, which its buckets
    overlap; never below half a link, since TCP gives MP's flows their share while they send."""
    capacity = dict(model.capacity_bps)
    for resource, size in load.items():
        capacity[resource] = max(capacity[resource] / 2, capacity[resource] - size * 8 / mp_s)
    least = min(capacity[r] / model.capacity_bps[r] for r in load)
    return replace(model, capacity_bps=capacity, notes=[
        *model.notes, f"the DP ring shares the MP group's uplinks: MP ran on {least:.0%} of them"])


def predict_plan(plan: Plan, fabric: FabricSection, enough_s: float = float("inf")) -> Prediction:
    """The plan's iteration time; a search passes the best time it has (`enough_s`), and a plan
    that cannot beat it may get a lower bound at or above it instead of its full prediction."""
    return predict_plan_fused(plan, fabric, enough_s)[0]


def dp_fusion_bytes(plan: Plan, fabric: FabricSection) -> float:
    """How the plan's gradient buckets are fused on `fabric` (merge_buckets' min_bytes): the
    fusion its prediction chose, which the emitted schedule then runs."""
    return predict_plan_fused(plan, fabric)[1]


def predict_plan_fused(plan: Plan, fabric: FabricSection,
                       enough_s: float = float("inf")) -> tuple[Prediction, float]:
    """predict_plan, and the bucket fusion it chose: of fusion_candidates_bytes, the one whose DP
    all-reduce finishes first after the backward (ties to the smaller buckets). A fixed set of
    candidates, each no slower at a higher bandwidth, keeps the time from rising with B (fusing
    at the bandwidth's own latency-bound size, n·α·R, did: ResNet-50 at 1,024 GPUs ran 21.73 ms
    at 128 Gb/s and 21.80 ms at 256)."""
    dp_bytes = dp_ring_bytes(plan)
    model = mp_flow_model(fabric, plan.k, plan.l, plan.mp_traffic, dp_bytes)
    dp_s = dp_allreduce_s(fabric, plan.k, plan.l, max(plan.grad_bytes), model.dp_rate_bps)
    # The DP all-reduce cannot end before the backward does: the MP path alone bounds the search.
    mp_s, model, ends = mp_makespan_s(plan, fabric, model, enough_s)
    shared = dp_load(fabric, plan.k, plan.l, dp_bytes)
    if shared and mp_s < enough_s:
        mp_s, model, ends = mp_makespan_s(plan, fabric, beside_dp(model, shared, mp_s), enough_s)
    notes = model.notes
    busiest = [0.0] * plan.k
    for i, op in enumerate(plan.placement.ops):
        for c in range(op.parts):
            busiest[plan.placement.gpu[i][c]] += us_to_s(op.part_us)
    compute = max(busiest)
    chosen: tuple[float, float, list[tuple[Bucket, ...]]] | None = None  # (finish, fusion, buckets)
    previous: list[tuple[Bucket, ...]] | None = None
    for fusion in fusion_candidates_bytes():
        fused = [merge_buckets(own, fusion) for own in plan.buckets]
        if fused == previous:
            continue  # fused as the smaller threshold before it did
        previous = fused
        finish = max([mp_s, *(overlapped_finish_s(
            [(max(ends[j][c] for j, c in bucket.subops),
              dp_allreduce_s(fabric, plan.k, plan.l, bucket.bytes, model.dp_rate_bps)) for bucket in buckets])
            for buckets in fused)])
        if chosen is None or finish < chosen[0]:
            chosen = (finish, fusion, fused)
    assert chosen is not None
    total, fusion, fused = chosen
    tail_s = total - mp_s
    buckets = max((len(b) for b in fused), default=0)
    formula = (f"MP critical path {mp_s * 1e3:.3f} ms + DP all-reduce ({dp_s * 1e3:.3f} ms at once) in "
               f"{buckets} bucket{'s' if buckets != 1 else ''} overlapping backward, {tail_s * 1e3:.3f} ms after it")
    if plan.l == 1:
        formula = f"MP critical path {mp_s * 1e3:.3f} ms"
    if notes:
        formula += "; " + "; ".join(notes)
    dark = min(model.dark_s, max(0.0, total - compute))
    return Prediction(total, Breakdown(compute_s=compute, communication_s=total - compute - dark,
                                       reconfiguration_s=dark, exposed_dp_s=tail_s), formula), fusion

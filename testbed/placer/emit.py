"""Turns a plan into the per-GPU schedule contract (testbed-schedule/1) and its N×N traffic matrix."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from testbed.model.schedule import (
    CollectiveStep,
    ComputeStep,
    GpuSchedule,
    RecvStep,
    Schedule,
    SendStep,
    Step,
    in_order_deps,
    with_channels,
)
from testbed.placer.balance import inputs_of
from testbed.placer.buckets import merge_buckets
from testbed.placer.plan import Plan
from testbed.shared.collective_plans import schedule_traffic


def _group_steps(plan: Plan) -> list[list[Step]]:
    """Steps of each GPU of one MP group, local ranks 0..k-1, in the order the placement runs them."""
    placement = plan.placement
    ops = placement.ops
    sends: dict[tuple[int, int], list[Step]] = defaultdict(list)
    recv_sizes = plan.messages
    for (q, p, i, dst), size in recv_sizes.items():
        tag = f"{q}.{p}>{i}@{dst}"
        sends[(q, p)].append(SendStep(id=f"s{tag}", peer=dst, bytes=round(size), tag=tag, deps=(f"c{q}.{p}",)))
    per_gpu: list[list[tuple[float, int, Step]]] = [[] for _ in range(plan.k)]
    received: set[tuple[int, int, int, int]] = set()  # a message is received once, before its first user
    for i, op in enumerate(ops):
        for c in range(op.parts):
            g, start = placement.gpu[i][c], placement.start_us[i][c]
            deps, recvs = [], []
            for q in op.parents:
                for p, _ in inputs_of(ops[q], op, c):
                    if placement.gpu[q][p] == g:
                        deps.append(f"c{q}.{p}")
                        continue
                    key, tag = (q, p, i, g), f"{q}.{p}>{i}@{g}"
                    if key not in received:
                        received.add(key)
                        recvs.append(RecvStep(id=f"r{tag}", peer=placement.gpu[q][p], bytes=round(recv_sizes[key]),
                                              tag=tag))
                    deps.append(f"r{tag}")
            compute = ComputeStep(id=f"c{i}.{c}", compute_us=op.part_us, deps=tuple(dict.fromkeys(deps)))
            for order, step in enumerate(recvs + [compute] + sorted(sends[(i, c)], key=lambda s: s.id)):
                per_gpu[g].append((start, order, step))
    return [[step for _, _, step in sorted(steps, key=lambda t: (t[0], t[1]))] for steps in per_gpu]


def _merge_computes(steps: list[Step], boundaries: frozenset[str] = frozenset()) -> tuple[list[Step], dict[str, str]]:
    """Consecutive compute steps become one, except after a step in `boundaries` (one that fills a
    gradient bucket, whose all-reduce starts then); later references follow the merged step (the
    map of merged ids is returned too)."""
    merged: list[Step] = []
    alias: dict[str, str] = {}
    closed: set[str] = set()  # merged computes that end at a boundary
    for step in steps:
        deps = tuple(dict.fromkeys(alias.get(d, d) for d in step.deps))
        last = merged[-1] if merged else None
        if isinstance(step, ComputeStep) and isinstance(last, ComputeStep) and last.id not in closed:
            own = tuple(d for d in deps if d != last.id and d not in last.deps)
            merged[-1] = ComputeStep(id=last.id, compute_us=last.compute_us + step.compute_us, deps=last.deps + own)
            alias[step.id] = last.id
        else:
            merged.append(replace(step, deps=deps))
        if step.id in boundaries:
            closed.add(alias.get(step.id, step.id))
    return merged, alias


def _offset(step: Step, base: int) -> Step:
    """The same step for the MP group whose first GPU is `base` (ids stay local to each GPU)."""
    if base and isinstance(step, (SendStep, RecvStep)):
        return step.with_peer(base + step.peer)
    return step


def _with_buckets(plan: Plan, local: int, steps: list[Step], alias: dict[str, str]) -> list[Step]:
    """The MP steps' order made explicit (each waits for the GPU's last blocking step, as in
    order), and after each bucket's last backward compute a DP all-reduce of the bucket that waits
    for that compute and the bucket before (one ring, one collective at a time, as a framework's
    communication stream runs them), beside the rest of the backward pass."""
    chain = in_order_deps([(s.id, s.kind, s.deps) for s in steps])
    ordered = [replace(s, deps=data + ctrl) for s, (data, ctrl) in zip(steps, chain)]
    members = tuple(local + j * plan.k for j in range(plan.l))
    after: dict[str, list[Step]] = defaultdict(list)
    for b, bucket in enumerate(plan.buckets[local]):
        j, c = bucket.subops[-1]
        compute = alias.get(f"c{j}.{c}", f"c{j}.{c}")
        previous = (f"dp-bucket{b - 1}",) if b else ()
        after[compute].append(CollectiveStep(id=f"dp-bucket{b}", op="allreduce", algorithm="ring", group=members,
                                             bytes=max(1, round(bucket.bytes)), deps=(compute, *previous)))
    return [t for s in ordered for t in (s, *after.get(s.id, ()))]


def plan_schedule(plan: Plan, name: str, iterations: int, min_bucket_bytes: float = 0.0,
                  first_replica_only: bool = False) -> Schedule:
    """The plan's per-GPU schedule: in order when there is no DP, else a DAG whose DP all-reduce
    runs in gradient buckets beside the backward compute (testbed.oracle.iteration's model);
    buckets smaller than `min_bucket_bytes` are fused (the oracle's choice, iteration.dp_fusion_bytes).
    `first_replica_only`: the first MP group's GPUs alone (its DP all-reduces still name every
    group's counterparts), what testbed.oracle.replicas simulates for all of them; no traffic matrix."""
    plan = replace(plan, buckets=tuple(merge_buckets(own, min_bucket_bytes) for own in plan.buckets))
    closing = [frozenset(f"c{b.subops[-1][0]}.{b.subops[-1][1]}" for b in buckets) for buckets in plan.buckets] \
        or [frozenset()] * plan.k
    group = [_merge_computes(steps, closing[g]) for g, steps in enumerate(_group_steps(plan))]
    # Every MP group runs its local GPUs' steps; only the peers of its sends and receives differ.
    local_steps = []
    for local, (merged, alias) in enumerate(group):
        local_steps.append(_with_buckets(plan, local, merged, alias) if plan.l > 1 and plan.buckets[local]
                           else merged)
    gpus = []
    for rank in range(plan.k if first_replica_only else plan.gpus):
        base, local = divmod(rank, plan.k)
        steps = [_offset(s, base * plan.k) for s in local_steps[local]]
        gpus.append(GpuSchedule(rank=rank, steps=tuple(steps)))
    dag = plan.l > 1
    placed = with_channels(gpus) if dag else tuple(gpus)
    matrix = () if first_replica_only else schedule_traffic(placed, plan.gpus)
    return Schedule(name=name, hosts=plan.gpus, iterations=iterations, gpus=placed,
                    traffic_matrix_bytes=matrix, execution="dag" if dag else "in-order")

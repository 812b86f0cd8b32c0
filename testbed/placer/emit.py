"""Turns a plan into the per-GPU schedule contract (testbed-schedule/1) and its N×N traffic matrix."""

from __future__ import annotations

from collections import defaultdict

from testbed.core.schedule import GpuSchedule, Schedule, Step
from testbed.placer.balance import inputs_of
from testbed.placer.plan import Plan


def _group_steps(plan: Plan) -> list[list[Step]]:
    """Steps of each GPU of one MP group, local ranks 0..k-1, in the order the placement runs them."""
    placement = plan.placement
    ops = placement.ops
    sends: dict[tuple[int, int], list[Step]] = defaultdict(list)
    recv_sizes = plan.messages
    for (q, p, i, dst), size in recv_sizes.items():
        tag = f"{q}.{p}>{i}@{dst}"
        sends[(q, p)].append(Step(id=f"s{tag}", kind="send", peer=dst, bytes=round(size), tag=tag, deps=(f"c{q}.{p}",)))
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
                        recvs.append(Step(id=f"r{tag}", kind="recv", peer=placement.gpu[q][p],
                                          bytes=round(recv_sizes[key]), tag=tag))
                    deps.append(f"r{tag}")
            compute = Step(id=f"c{i}.{c}", kind="compute", compute_us=op.part_us, deps=tuple(dict.fromkeys(deps)))
            for order, step in enumerate(recvs + [compute] + sorted(sends[(i, c)], key=lambda s: s.id)):
                per_gpu[g].append((start, order, step))
    return [[step for _, _, step in sorted(steps, key=lambda t: (t[0], t[1]))] for steps in per_gpu]


def _merge_computes(steps: list[Step]) -> list[Step]:
    """Consecutive compute steps become one; later references follow the merged step."""
    merged: list[Step] = []
    alias: dict[str, str] = {}
    for step in steps:
        deps = tuple(dict.fromkeys(alias.get(d, d) for d in step.deps))
        last = merged[-1] if merged else None
        if step.kind == "compute" and last is not None and last.kind == "compute":
            own = tuple(d for d in deps if d != last.id and d not in last.deps)
            merged[-1] = Step(id=last.id, kind="compute", compute_us=(last.compute_us or 0) + (step.compute_us or 0),
                              deps=last.deps + own)
            alias[step.id] = last.id
            continue
        merged.append(Step(**{**step.__dict__, "deps": deps}))
    return merged


def _offset(step: Step, base: int, k: int) -> Step:
    """The same step for the MP group whose first GPU is `base` (ids stay local to each GPU)."""
    if step.peer is None:
        return step
    return Step(**{**step.__dict__, "peer": base + step.peer})


def plan_schedule(plan: Plan, name: str, iterations: int) -> Schedule:
    group = [_merge_computes(steps) for steps in _group_steps(plan)]
    gpus = []
    n = plan.gpus
    matrix = [[0] * n for _ in range(n)]
    for rank in range(n):
        base, local = divmod(rank, plan.k)
        base *= plan.k
        steps = [_offset(s, base, plan.k) for s in group[local]]
        for s in steps:
            if s.kind == "send":
                assert s.peer is not None
                matrix[rank][s.peer] += s.message_bytes()
        if plan.l > 1 and plan.grad_bytes[local] > 0:
            members = tuple(local + j * plan.k for j in range(plan.l))
            last = [s.id for s in steps if s.kind == "compute"][-1:]
            grads = round(plan.grad_bytes[local])
            steps.append(Step(id="dp-allreduce", kind="collective", op="allreduce", algorithm="ring", group=members,
                              bytes=grads, deps=tuple(last)))
            peer = plan.dp_peer(rank)
            assert peer is not None  # l > 1
            matrix[rank][peer] += round(2 * (plan.l - 1) / plan.l * grads)
        gpus.append(GpuSchedule(rank=rank, steps=tuple(steps)))
    return Schedule(name=name, hosts=n, iterations=iterations, gpus=tuple(gpus),
                    traffic_matrix_bytes=tuple(tuple(row) for row in matrix))

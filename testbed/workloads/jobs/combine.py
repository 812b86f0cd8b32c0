"""Several training jobs on one fabric: each job's schedule made as if it ran alone on its GPUs,
then laid onto the fabric's hosts as one schedule (ids, tags and groups renamed per job) that the
agents replay and the oracle simulates, every job's traffic sharing the links, circuits and
wavelengths with the others'. Each job's predicted time together, and alone on the same fabric."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from testbed.fabrics.partitioned import shares
from testbed.model.errors import InputError
from testbed.model.scenario import Job, Scenario
from testbed.model.schedule import (
    CollectiveStep,
    GpuSchedule,
    RecvStep,
    Schedule,
    SendStep,
    Step,
    in_order_deps,
    with_channels,
)


def job_scenario(scenario: Scenario, job: Job, gpus: list[int]) -> Scenario:
    """The job as a scenario of its own: the fabric's kind and rates with the job's GPU count (what
    its schedule and placement are made for; the fabric itself is shared)."""
    fabric = scenario.fabric.model_copy(update={"hosts": len(gpus)})
    return scenario.model_copy(update={"name": f"{scenario.name}-{job.name}"[:64], "fabric": fabric,
                                       "workload": job.workload, "jobs": None})


def _renamed(job: str, step: Step, hosts: list[int], deps: tuple[str, ...]) -> Step:
    ident, own_deps = f"{job}/{step.id}", tuple(f"{job}/{d}" for d in deps)
    if isinstance(step, (SendStep, RecvStep)):
        return replace(step, id=ident, deps=own_deps, peer=hosts[step.peer], tag=f"{job}/{step.tag}")
    if isinstance(step, CollectiveStep):
        return replace(step, id=ident, deps=own_deps, group=tuple(hosts[r] for r in step.group), channel=None)
    return replace(step, id=ident, deps=own_deps)


def combined_schedule(scenario: Scenario, make: Callable[[Scenario], Schedule],
                      only: str | None = None) -> Schedule:
    """Every job's schedule (`make` for one job's scenario) on its hosts; with `only`, that job's
    alone (the others' GPUs idle). In-order jobs become explicit DAGs where jobs mix executions."""
    placed = scenario.job_gpus()
    schedules = []
    for job, gpus in placed:
        if only is not None and job.name != only:
            continue  # the other jobs' GPUs idle: their schedules are not needed (the plan made them once)
        try:
            schedules.append((job, gpus, make(job_scenario(scenario, job, gpus))))
        except InputError as error:
            raise InputError(f"{scenario.name}: jobs: job {job.name!r}: {error}") from None
    executions = {s.execution for _, _, s in schedules}
    execution = executions.pop() if len(executions) == 1 else "dag"
    n = scenario.fabric.hosts
    steps: list[tuple[Step, ...]] = [() for _ in range(n)]
    matrix: list[list[int] | None] = [None] * n  # rows of GPUs that send; the rest share one row of zeros
    for job, gpus, schedule in schedules:
        for gpu in schedule.gpus:
            explicit = [d + c for d, c in in_order_deps([(s.id, s.kind, s.deps) for s in gpu.steps])] \
                if schedule.execution == "in-order" and execution == "dag" else [s.deps for s in gpu.steps]
            steps[gpus[gpu.rank]] = tuple(_renamed(job.name, s, gpus, deps) for s, deps in zip(gpu.steps, explicit))
        for i, row in enumerate(schedule.traffic_matrix_bytes):
            for j, size in enumerate(row):
                if size:
                    out = matrix[gpus[i]]
                    if out is None:
                        out = matrix[gpus[i]] = [0] * n
                    out[gpus[j]] += size
    zeros = (0,) * n
    gpus_out = tuple(GpuSchedule(h, s) for h, s in enumerate(steps))
    if execution == "dag":
        gpus_out = with_channels(gpus_out)
    partitions: tuple[tuple[int, ...], ...] = ()
    if scenario.job_sharing == "partitioned":
        partitions = tuple(tuple(gpus) for _, gpus in placed)
        shares(scenario.fabric, partitions)  # a kind without shares, or a job too small for one: said here
    return Schedule(f"{scenario.name}" if only is None else f"{scenario.name}-{only}", n,
                    scenario.workload.iterations, gpus_out, tuple(tuple(row) if row else zeros for row in matrix),
                    execution,
                    partitions=partitions)


def job_times(scenario: Scenario, gpu_end_s: tuple[float, ...]) -> dict[str, float]:
    """Each job's iteration from a simulation's per-GPU end times: its GPUs' last."""
    return {job.name: max(gpu_end_s[g] for g in gpus) for job, gpus in scenario.job_gpus()}

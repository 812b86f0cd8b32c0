"""A `collective` workload's schedule: every GPU runs the same collective once per iteration (the
collective plans' algorithms; BytePS and PS have their own builder, testbed.workloads.collective.byteps)."""

from __future__ import annotations

from testbed.fabrics.all_kinds import KINDS
from testbed.model.errors import InputError
from testbed.model.scenario import Scenario
from testbed.model.schedule import CollectiveStep, GpuSchedule, Schedule
from testbed.shared.collective_plans import SUPPORTED_COLLECTIVES, collective_traffic
from testbed.workloads.collective.ina import job_size
from testbed.workloads.collective.section import CollectiveWorkload


def collective_schedule(scenario: Scenario, workload: CollectiveWorkload) -> Schedule:
    """Schedule of a `collective` workload run by the GPUs themselves (or an aggregation node)."""
    key = (workload.collective, workload.algorithm)
    if key not in SUPPORTED_COLLECTIVES:
        supported = ", ".join(f"{c}/{a}" for c, a in sorted(SUPPORTED_COLLECTIVES))
        raise InputError(
            f"{scenario.name}: workload collective {key[0]} with algorithm {key[1]} is not supported yet; "
            f"supported: {supported}"
        )
    node = KINDS[scenario.fabric.kind].aggregation_node
    if workload.algorithm == "ina" and not node:
        raise InputError(f"{scenario.name}: algorithm ina needs an aggregation node: set fabric.kind to ina")
    hosts = scenario.fabric.hosts
    per_job = job_size(scenario, workload)
    groups = [tuple(range(start, start + per_job)) for start in range(0, hosts, per_job)]
    gpus = tuple(
        GpuSchedule(
            rank=rank,
            steps=(
                CollectiveStep(
                    id=workload.collective,
                    op=workload.collective,
                    algorithm=workload.algorithm,
                    group=groups[rank // per_job],
                    bytes=workload.bytes,
                ),
            ),
        )
        for rank in range(hosts)
    )
    block = collective_traffic(workload.collective, workload.algorithm, per_job, workload.bytes)
    matrix = [[0] * hosts for _ in range(hosts)]
    for group in groups:
        for i, src in enumerate(group):
            for j, dst in enumerate(group):
                matrix[src][dst] = block[i][j]
    return Schedule(
        name=scenario.name,
        hosts=hosts,
        iterations=workload.iterations,
        gpus=gpus,
        traffic_matrix_bytes=tuple(tuple(row) for row in matrix),
    )

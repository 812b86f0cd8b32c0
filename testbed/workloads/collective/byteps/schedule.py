"""Schedules of BytePS and classic-PS all-reduce: which ranks are GPU machines and which are CPU
machines, how the buffer is chunked, and on Elect-Cluster the intra-server steps around it."""

from __future__ import annotations

import math

from testbed.fabrics.all_kinds import KINDS, PARAMETER_SERVER_FABRICS
from testbed.fabrics.elect_cluster.section import ElectClusterFabric
from testbed.fabrics.ps.section import PsFabric
from testbed.model.errors import InputError
from testbed.model.scenario import Scenario
from testbed.model.schedule import CollectiveStep, ComputeStep, GpuSchedule, Schedule, Step
from testbed.model.units import gbps_to_bps, s_to_us, us_to_s
from testbed.shared.byteps_partition import PartitionError, chunk_count, service_buckets, transfers
from testbed.workloads.collective.byteps.oracle import Instance, intra_server_s
from testbed.workloads.collective.section import CollectiveWorkload


def instances(scenario: Scenario, workload: CollectiveWorkload) -> list[Instance]:
    """The all-reduces that run at once. Elect-Flat and ps: one, among all GPUs, with the ps
    fabric's CPU machines (ranks after the GPUs) as extra summation services. Elect-Cluster: a
    server is one GPU machine, and after the intra-server reduce-scatter GPU i of every server
    all-reduces its 1/g of the buffer with GPU i of the others (g instances over the uplinks)."""
    fabric = scenario.fabric
    classic = workload.algorithm == "ps"
    where = f"{scenario.name}: workload.algorithm {workload.algorithm}"
    if fabric.kind not in PARAMETER_SERVER_FABRICS:
        raise InputError(f"{where} runs on {', '.join(PARAMETER_SERVER_FABRICS)}, not {fabric.kind}; "
                         f"change fabric.kind")
    if workload.collective != "allreduce":
        raise InputError(f"{where} is an all-reduce; set workload.collective to allreduce")
    n, k = fabric.hosts, fabric.cpu_servers if isinstance(fabric, PsFabric) else 0
    if isinstance(fabric, ElectClusterFabric):
        g = fabric.gpus_per_server
        if n % g or n // g < 2:
            raise InputError(f"{where} on {fabric.kind} needs at least two full servers (fabric.hosts a multiple "
                             f"of gpus_per_server {g}, at least {2 * g}); got {n} hosts")
        n = n // g
        groups = [tuple(server * g + i for server in range(n)) for i in range(g)]
        size = workload.bytes / g
        services: tuple[int, ...] = ()
    else:
        groups, size = [tuple(range(n))], float(workload.bytes)
        services = tuple(range(n, n + k))
    try:
        buckets = sum(service_buckets(n, k, classic))
    except PartitionError as error:
        hint = "" if KINDS[fabric.kind].cpu_machines else " (CPU machines exist on fabric.kind ps, set by cpu_servers)"
        raise InputError(f"{where}: {error}{hint}") from None
    chunks = chunk_count(size, buckets)
    return [Instance(group, services, size, chunks, classic) for group in groups]


def local_steps_us(scenario: Scenario, workload: CollectiveWorkload) -> tuple[float, float]:
    """Intra-server work before and after the network step (Elect-Cluster only)."""
    fabric = scenario.fabric
    if not isinstance(fabric, ElectClusterFabric):
        return 0.0, 0.0
    before, after = intra_server_s(fabric.gpus_per_server, workload.bytes,
                                   gbps_to_bps(fabric.gpu_bandwidth_gbps), us_to_s(fabric.latency_us))
    return s_to_us(before), s_to_us(after)


def total_ranks(scenario: Scenario) -> int:
    """GPUs plus the ps fabric's CPU machines."""
    fabric = scenario.fabric
    return fabric.hosts + (fabric.cpu_servers if isinstance(fabric, PsFabric) else 0)


def traffic(instances_: list[Instance], ranks: int) -> tuple[tuple[int, ...], ...]:
    """Bytes per iteration from row to column: pushes to each chunk's service and its sum back."""
    matrix = [[0.0] * ranks for _ in range(ranks)]
    for inst in instances_:
        nodes = inst.group + inst.services
        for _, src, dst in transfers(len(inst.group), len(inst.services), inst.classic, inst.chunks):
            matrix[nodes[src]][nodes[dst]] += inst.size_bytes / inst.chunks
    return tuple(tuple(round(v) for v in row) for row in matrix)


def byteps_schedule(scenario: Scenario, workload: CollectiveWorkload) -> Schedule:
    """Every GPU and CPU machine's step: its instance's all-reduce, between the intra-server steps."""
    found = instances(scenario, workload)
    ranks = total_ranks(scenario)
    before_us, after_us = local_steps_us(scenario, workload)
    of_rank = {rank: inst for inst in found for rank in inst.group + inst.services}
    gpus = []
    for rank in range(ranks):
        inst = of_rank[rank]
        step = CollectiveStep(id="allreduce", op="allreduce", algorithm=workload.algorithm, group=inst.group,
                              services=inst.services, chunks=inst.chunks, bytes=math.ceil(inst.size_bytes))
        steps: list[Step] = [step]
        if before_us > 0:
            steps = [ComputeStep(id="intra-server-reduce", compute_us=before_us), step,
                     ComputeStep(id="intra-server-allgather", compute_us=after_us, deps=("allreduce",))]
        gpus.append(GpuSchedule(rank=rank, steps=tuple(steps)))
    return Schedule(name=scenario.name, hosts=ranks, iterations=workload.iterations, gpus=tuple(gpus),
                    traffic_matrix_bytes=traffic(found, ranks))

"""PS: GPU machines and `cpu_servers` CPU machines of a parameter server (BytePS) on one switch,
all at B."""

from __future__ import annotations

from testbed.fabrics.base import FabricBehaviour, TopologyBuilder
from testbed.fabrics.ps.section import PsFabric
from testbed.model.topology import KindLayout
from testbed.model.units import gbps_to_bps, transfer_time_s, us_to_s
from testbed.network.flow_model import FlowModel, Traffic, nic_flow_model


def build(fabric: PsFabric, builder: TopologyBuilder) -> dict[str, KindLayout]:
    # The CPU machines are the ranks after the GPUs (role "cpu").
    builder.one_switch("flat", fabric.hosts + fabric.cpu_servers)
    return {}


def flow_model(fabric: PsFabric, k: int, l: int, traffic: Traffic, dp_bytes: float) -> FlowModel:
    return nic_flow_model(gbps_to_bps(fabric.gpu_bandwidth_gbps), k)


def byteps_bytes_per_machine(n: int, cpus: float, size_bytes: float) -> float:
    """Bytes each machine sends (and receives) in BytePS's optimal split of an all-reduce of
    `size_bytes` among n GPU machines with `cpus` CPU machines of the same bandwidth (Jiang et al.,
    OSDI 2020): a share x of the data is summed on the CPU machines, the rest on the GPU machines,
    with x = 2·cpus(n−1)/(n² + cpus·n − 2·cpus) so that both carry 2n(n−1)/(n² + cpus·n − 2·cpus)·M.
    No CPU machine is a ring all-reduce (2(n−1)/n·M); from n CPU machines on, a GPU machine's own
    push and pull (M) bound it."""
    if n <= 1:
        return 0.0
    if cpus >= n:
        return size_bytes
    return 2 * n * (n - 1) * size_bytes / (n * n + cpus * n - 2 * cpus)


def dp_allreduce_s(fabric: PsFabric, k: int, l: int, grad_bytes: float, planned_rate_bps: float | None) -> float:
    # The k MP ranks' DP all-reduces run at once and share the same CPU machines.
    per_machine = byteps_bytes_per_machine(l, fabric.cpu_servers / k, grad_bytes)
    rate_bps = gbps_to_bps(fabric.gpu_bandwidth_gbps)
    return 2 * (l - 1) * us_to_s(fabric.latency_us) + transfer_time_s(per_machine, rate_bps)


BEHAVIOUR = FabricBehaviour(build, flow_model, dp_allreduce_s)

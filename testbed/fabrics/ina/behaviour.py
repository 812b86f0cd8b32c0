"""INA: no switch; an aggregation node owns one port per worker (a direct link shaped at B on both
ends), sums INA packets in its pipeline and forwards all other traffic in its kernel."""

from __future__ import annotations

from testbed.core.shaping import line_rate_bps
from testbed.fabrics.base import FabricBehaviour, TopologyBuilder, host_mac
from testbed.fabrics.ina.section import InaFabric
from testbed.model.topology import InaLayout, InterfaceSpec, KindLayout, LinkSpec
from testbed.model.units import gbps_to_bps, transfer_time_s, us_to_s
from testbed.network.flow_model import FlowModel, Traffic, nic_flow_model


def build(fabric: InaFabric, builder: TopologyBuilder) -> dict[str, KindLayout]:
    n, rate = fabric.hosts, builder.host_rate_bps
    node_name = f"h{n + 1}"
    node_interfaces = []
    for rank in range(n):
        name = f"h{rank + 1}-eth0"
        peer = f"h{n + 1}-eth{rank}"
        builder.links.append(LinkSpec(host=f"h{rank + 1}", interface=name, peer_host=node_name, peer_interface=peer,
                                      payload_rate_bps=rate, line_rate_bps=line_rate_bps(rate), shaped_on="both"))
        builder.add_host(InterfaceSpec(name=name, mac=host_mac(rank), peer=peer, payload_rate_bps=rate))
        node_interfaces.append(InterfaceSpec(name=peer, mac=host_mac(n, rank + 1), peer=name, payload_rate_bps=rate))
    builder.add_host(*node_interfaces, role="aggregator")
    return {"ina": InaLayout(node=node_name, node_rank=n)}


AGGREGATION = ("aggregation",)  # the node's summing pipeline, shared by every worker's INA stream


def flow_model(fabric: InaFabric, k: int, l: int, traffic: Traffic, dp_bytes: float) -> FlowModel:
    """The node forwards like a non-blocking switch; a GPU's own pair (g, g) stands for its INA
    stream, up its port to the node and the sums back down, through the node's summing pipeline
    where that is slower than the ports together."""
    model = nic_flow_model(gbps_to_bps(fabric.gpu_bandwidth_gbps), k)
    if fabric.aggregation_gbps:
        model.capacity_bps[AGGREGATION] = gbps_to_bps(fabric.aggregation_gbps)
        model.default = lambda s, d: (("out", s), ("in", d), *((AGGREGATION,) if s == d else ()))
    return model


def dp_allreduce_s(fabric: InaFabric, k: int, l: int, grad_bytes: float, planned_rate_bps: float | None) -> float:
    # One round: each worker sends M to the node and receives the sum.
    return us_to_s(fabric.latency_us) + transfer_time_s(grad_bytes, gbps_to_bps(fabric.gpu_bandwidth_gbps))


BEHAVIOUR = FabricBehaviour(build, flow_model, dp_allreduce_s)

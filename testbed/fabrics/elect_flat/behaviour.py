"""Elect-Flat: every GPU on one non-blocking electrical switch at B."""

from __future__ import annotations

from testbed.fabrics.base import FabricBehaviour, TopologyBuilder
from testbed.fabrics.elect_flat.section import ElectFlatFabric
from testbed.model.topology import KindLayout
from testbed.model.units import gbps_to_bps, us_to_s
from testbed.network.flow_model import FlowModel, Traffic, nic_flow_model, ring_allreduce_s


def build(fabric: ElectFlatFabric, builder: TopologyBuilder) -> dict[str, KindLayout]:
    builder.one_switch("flat", fabric.hosts)
    return {}


def flow_model(fabric: ElectFlatFabric, k: int, l: int, traffic: Traffic, dp_bytes: float) -> FlowModel:
    return nic_flow_model(gbps_to_bps(fabric.gpu_bandwidth_gbps), k)


def dp_allreduce_s(fabric: ElectFlatFabric, k: int, l: int, grad_bytes: float, planned_rate_bps: float | None) -> float:
    return ring_allreduce_s(l, grad_bytes, gbps_to_bps(fabric.gpu_bandwidth_gbps), us_to_s(fabric.latency_us))


BEHAVIOUR = FabricBehaviour(build, flow_model, dp_allreduce_s)

"""The oracle's view of any fabric: the flow model of one MP group, the DP all-reduce between
counterpart GPUs, and the forwarding load, each from the kind's module in testbed/fabrics."""

from __future__ import annotations

from testbed.fabrics import partitioned
from testbed.fabrics.all_kinds import behaviour
from testbed.model.fabric_section import FabricSection
from testbed.network.flow_model import FlowModel, Traffic
from testbed.network.flows import Resource


def mp_flow_model(fabric: FabricSection, k: int, l: int, traffic: Traffic, dp_bytes: float = 0.0) -> FlowModel:
    """The flow model of the MP group on `fabric`, planned (circuits, wavelengths) for `traffic`."""
    return behaviour(fabric.kind).flow_model(fabric, k, l, traffic, dp_bytes)


def schedule_flow_model(fabric: FabricSection, n: int, traffic: Traffic,
                        partitions: tuple[tuple[int, ...], ...] = ()) -> FlowModel:
    """The plan a schedule's n GPUs run on: one for all their traffic, or each job's on its share
    of the fabric (`partitions`: each job's GPUs, job_sharing: partitioned)."""
    if partitions:
        return partitioned.flow_model(fabric, partitions, n, traffic)
    return mp_flow_model(fabric, n, 1, traffic)


def dp_allreduce_s(fabric: FabricSection, k: int, l: int, grad_bytes: float,
                   planned_rate_bps: float | None = None) -> float:
    """All-reduce of `grad_bytes` among the l counterpart GPUs (one per MP group). A circuit plan
    that sized the DP ring passes its rate as `planned_rate_bps`."""
    if l <= 1 or grad_bytes <= 0:
        return 0.0
    return behaviour(fabric.kind).dp_allreduce_s(fabric, k, l, grad_bytes, planned_rate_bps)


def dp_load(fabric: FabricSection, k: int, l: int, dp_bytes: float) -> dict[Resource, float]:
    """Bytes the DP ring (`dp_bytes` sent by each GPU) puts on resources of the MP group's flow model."""
    return behaviour(fabric.kind).dp_load(fabric, k, l, dp_bytes)


def forwarding_load_factor(fabric: FabricSection, traffic: Traffic) -> float:
    """How many packets the emulating machine forwards per packet of payload, relative to a
    switched fabric: relayed paths cross the fabric once per hop, and so do their acknowledgements
    on the way back. Elect-Flat is 1; a ring all-reduce on one-way OCS circuits with N=8 is 3."""
    return behaviour(fabric.kind).forwarding_load_factor(fabric, traffic)

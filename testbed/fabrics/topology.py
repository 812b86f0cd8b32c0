"""The emulated fabric as data (topology.json): switches, hosts with their interfaces, and links with
emulated rates, built by each kind's module. Pure: the Mininet shim builds it, the controller programs it."""

from __future__ import annotations

from testbed.core.shaping import LINUX_RTO_MIN_MS, queued_rto_min_ms
from testbed.fabrics.all_kinds import KINDS, behaviour
from testbed.fabrics.base import TopologyBuilder, host_ip
from testbed.fabrics.rendering import rto_min_ms
from testbed.model.contracts import Topology
from testbed.model.fabric_section import FabricSection, ReconfigurableSection
from testbed.model.topology import HostSpec
from testbed.model.units import ms_to_s, us_to_s


def build_topology(fabric: FabricSection, tag: str, host_rate_bps: float, datapath: str,
                   segments_per_packet: int = 0, rto_min_ms: int = LINUX_RTO_MIN_MS) -> Topology:
    """Topology of `fabric` with each GPU's emulated rate `host_rate_bps` (the dilated B): the
    kind's module (testbed/fabrics) adds its switches, hosts and links and its own layout; every
    host then gets its name, rank, address and role (gpu, cpu for a ps fabric's CPU machines, or
    the one its kind gave it)."""
    builder = TopologyBuilder(tag, host_rate_bps)
    layout = behaviour(fabric.kind).build(fabric, builder)
    hosts = []
    for rank, pending in enumerate(builder.hosts):
        first = pending.interfaces[0]
        hosts.append(HostSpec(name=f"h{rank + 1}", rank=rank, ip=host_ip(rank), mac=first.mac,
                              role=pending.role or ("gpu" if rank < fabric.hosts else "cpu"),
                              interfaces=tuple(pending.interfaces), switch=first.switch, port=first.port))
    return Topology.model_validate({"fabric": fabric.kind, "datapath": datapath, "host_rate_bps": host_rate_bps,
                                    "switches": builder.switches, "hosts": hosts, "links": builder.links,
                                    "segments_per_packet": segments_per_packet, "rto_min_ms": rto_min_ms,
                                    **layout})


def reconfig_us(fabric: FabricSection) -> float:
    """The dark time of a reconfiguration: the scenario's, else the kind's default (0: none)."""
    if isinstance(fabric, ReconfigurableSection) and fabric.reconfig_us is not None:
        return fabric.reconfig_us
    return behaviour(fabric.kind).default_reconfig_us


def route_rto_min_s(fabric: FabricSection, dilation: float, queue_wall_s: float = 0.0) -> float:
    """TCP's shortest retransmission timeout on the fabric's routes, in wall seconds: what a timeout
    costs at least. A kind whose controller re-points links sets it from its dilated dark time
    (rendering.rto_min_ms, as the controller renders its routes); a switched kind's hosts from the
    longest their own queue takes to drain, `queue_wall_s` (shaping.queued_rto_min_ms); INA's
    node keeps Linux's."""
    spec = behaviour(fabric.kind)
    if spec.link_rules is not None:
        return ms_to_s(rto_min_ms(us_to_s(dark_us(fabric)) * dilation))
    if switched_host_routes(fabric.kind):
        return ms_to_s(queued_rto_min_ms(queue_wall_s))
    return ms_to_s(LINUX_RTO_MIN_MS)


def switched_host_routes(kind: str) -> bool:
    """Whether the kind's hosts reach each other over the subnet's one route (switched fabrics),
    whose timeout the set-up raises for the hosts' queues (link_setup.host_commands)."""
    spec = KINDS[kind]
    return not spec.routed and not spec.aggregation_node


def dark_us(fabric: FabricSection) -> float:
    """How long a retuned link stays dark: the reconfiguration, or longer where the controller
    holds it (a controller can always wait before it lights a link again)."""
    held = fabric.dark_hold_us if isinstance(fabric, ReconfigurableSection) else None
    return max(reconfig_us(fabric), held or 0.0)


def retune_threshold_us(fabric: FabricSection) -> float:
    """The gain a re-plan must expect over the next period to retune: the scenario's threshold
    (never below the dark time it costs), else the dark time."""
    dark = dark_us(fabric)
    if isinstance(fabric, ReconfigurableSection) and fabric.retune_threshold_us is not None:
        return max(dark, fabric.retune_threshold_us)
    return dark


def estimate_period_us(fabric: FabricSection) -> float:
    """How often the controller re-plans: the scenario's period, else the kind's rule."""
    if not isinstance(fabric, ReconfigurableSection):
        return float(ReconfigurableSection.model_fields["estimate_period_us"].default)
    per_reconfig = behaviour(fabric.kind).period_per_reconfig
    if per_reconfig is not None and "estimate_period_us" not in fabric.model_fields_set:
        return per_reconfig * reconfig_us(fabric)
    return fabric.estimate_period_us

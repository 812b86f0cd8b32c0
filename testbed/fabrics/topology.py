"""The emulated fabric as data (topology.json): switches, hosts with their interfaces, and links with
emulated rates, built by each kind's module. Pure: the Mininet shim builds it, the controller programs it."""

from __future__ import annotations

from testbed.core.shaping import LINUX_RTO_MIN_MS
from testbed.fabrics.all_kinds import behaviour
from testbed.fabrics.base import TopologyBuilder, host_ip
from testbed.model.contracts import Topology
from testbed.model.fabric_section import FabricSection
from testbed.model.topology import HostSpec


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

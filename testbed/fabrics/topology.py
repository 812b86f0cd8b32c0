"""The emulated fabric as data (topology.json): switches, hosts with their interfaces, and links with
emulated rates, built by each kind's module. Pure: the Mininet shim builds it, the controller programs it."""

from __future__ import annotations

from typing import Any

from testbed.fabrics.all_kinds import behaviour
from testbed.fabrics.base import TopologyBuilder, host_ip
from testbed.model.fabric_section import FabricSection, ReconfigurableSection


def build_topology(fabric: FabricSection, tag: str, host_rate_bps: float, datapath: str) -> dict[str, Any]:
    """Topology of `fabric` with each GPU's emulated rate `host_rate_bps` (the dilated B): the
    kind's module (testbed/fabrics) adds its switches, hosts and links and its own sections; every
    host then gets its name, rank, address and role (gpu, cpu for a ps fabric's CPU machines, or
    the one its kind gave it)."""
    builder = TopologyBuilder(tag, host_rate_bps)
    extra = behaviour(fabric.kind).build(fabric, builder)
    for rank, host in enumerate(builder.hosts):
        first = host["interfaces"][0]
        role = host.pop("role", None) or ("gpu" if rank < fabric.hosts else "cpu")
        host.update({"name": f"h{rank + 1}", "rank": rank, "ip": host_ip(rank), "mac": first["mac"], "role": role})
        if "switch" in first:
            host.update({"switch": first["switch"], "port": first["port"]})
    return {"fabric": fabric.kind, "datapath": datapath, "host_rate_bps": host_rate_bps,
            "switches": builder.switches, "hosts": builder.hosts, "links": builder.links, **extra}


def switch_interfaces(topology: dict[str, Any]) -> list[str]:
    """Root-namespace interface names the fabric creates (what cleanup must remove)."""
    names = [f"{link['switch']}-eth{link['port']}" for link in topology["links"] if "switch" in link]
    names += [f"{link['peer_switch']}-eth{link['peer_port']}" for link in topology["links"] if "peer_switch" in link]
    return names


def reconfig_us(fabric: FabricSection) -> float:
    """The dark time of a reconfiguration: the scenario's, else the kind's default (0: none)."""
    if isinstance(fabric, ReconfigurableSection) and fabric.reconfig_us is not None:
        return fabric.reconfig_us
    return behaviour(fabric.kind).default_reconfig_us


def retune_threshold_us(fabric: FabricSection) -> float:
    """The gain a re-plan must expect over the next period to retune: the scenario's threshold
    (never below the dark time it costs), else the dark time."""
    dark_us = reconfig_us(fabric)
    if isinstance(fabric, ReconfigurableSection) and fabric.retune_threshold_us is not None:
        return max(dark_us, fabric.retune_threshold_us)
    return dark_us


def estimate_period_us(fabric: FabricSection) -> float:
    """How often the controller re-plans: the scenario's period, else the kind's rule."""
    if not isinstance(fabric, ReconfigurableSection):
        return float(ReconfigurableSection.model_fields["estimate_period_us"].default)
    per_reconfig = behaviour(fabric.kind).period_per_reconfig
    if per_reconfig is not None and "estimate_period_us" not in fabric.model_fields_set:
        return per_reconfig * reconfig_us(fabric)
    return fabric.estimate_period_us

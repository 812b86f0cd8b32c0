"""SiP-OCS's rule plan: its circuits `(switch, src, dst) -> 1` checked (each OCS a partial
permutation) and rendered as port-to-port rules, per-port shaping and relay routes. Pure."""

from __future__ import annotations

from typing import Any

from testbed.core.shaping import LINUX_RTO_MIN_MS, htb_commands_small_first
from testbed.fabrics import rendering
from testbed.fabrics.rendering import PlanError, Rendering
from testbed.model.contracts import Topology
from testbed.model.openflow import FlowRule
from testbed.model.topology import OcsLayout


def validate_circuits(topology: Topology, circuits: frozenset[tuple[int, int, int]]) -> None:
    """Each OCS joins a transmit port to at most one receive port and back: a partial permutation."""
    n, q = len(topology.hosts), topology.layout(OcsLayout).switches
    tx, rx = set(), set()
    for switch, src, dst in sorted(circuits):
        if not (0 <= switch < q):
            raise PlanError(f"circuit {src}->{dst} names OCS {switch}, but the fabric has OCS 0..{q - 1}")
        if not (0 <= src < n and 0 <= dst < n) or src == dst:
            raise PlanError(f"circuit {src}->{dst} on OCS {switch} must join two different GPUs of 0..{n - 1}")
        if (switch, src) in tx:
            raise PlanError(f"GPU {src} transmits on more than one circuit of OCS {switch}")
        if (switch, dst) in rx:
            raise PlanError(f"GPU {dst} receives on more than one circuit of OCS {switch}")
        tx.add((switch, src))
        rx.add((switch, dst))


def render_circuits(topology: Topology, circuits: frozenset[tuple[int, int, int]],
               rto_ms: int = LINUX_RTO_MIN_MS) -> Rendering:
    hosts = topology.hosts
    dpids = [sw.dpid for sw in topology.switches]
    rules: dict[int, set[FlowRule]] = {dpid: set() for dpid in dpids}
    via: dict[tuple[int, int], list[int]] = {}
    for switch, src, dst in sorted(circuits):
        rules[dpids[switch]].add(FlowRule(rendering.PRIORITY_LINK, (("in_port", src + 1),), dst + 1,
                                          table=rendering.FORWARD_TABLE))
        via.setdefault((src, dst), []).append(switch)
    hops, unreachable = rendering.next_hops_over(topology, list(via))
    circuit_bps = topology.layout(OcsLayout).circuit_rate_bps
    host_lines: dict[int, dict[str, str]] = {}
    for host in hosts:
        src = host.rank
        lines = {}
        carried = [0] * len(host.interfaces)  # circuits whose traffic leaves by each port
        for (a, _), switches in via.items():
            if a == src:
                carried[switches[0]] += len(switches)
        for q, intf in enumerate(host.interfaces):
            # An unused port keeps one circuit's rate: nothing is routed to it.
            shaping = htb_commands_small_first(intf.name, max(1, carried[q]) * circuit_bps,
                                               rendering.relayed_payload_bps(topology))[1:4]
            lines[f"rate {q}"] = "\n".join(shaping)
        for dst, nh in sorted(hops[src].items()):
            port = host.interfaces[via[(src, nh)][0]].name
            lines[f"route {dst}"] = rendering.route_line(hosts[dst].ip, hosts[nh].ip, port, rto_ms)
        for s, d in unreachable:
            if s == src:
                lines[f"route {d}"] = f"ip route replace unreachable {hosts[d].ip}/32"
        host_lines[src] = lines
    next_hops = {src: {dst: (nh, via[(src, nh)][0]) for dst, nh in own.items()} for src, own in hops.items()}
    return Rendering({d: frozenset(r) for d, r in rules.items()}, host_lines, tuple(unreachable), next_hops)


def live_circuits(state: dict[Any, int]) -> frozenset[tuple[int, int, int]]:
    return frozenset(key for key, count in state.items() if count > 0)

"""SiP-Ring's rule plan: its lightpaths `(src, dst) -> wavelengths` checked against reach and
wavelengths and rendered as per-destination rules, one HTB class per lightpath and relay routes. Pure."""

from __future__ import annotations

from testbed.core.shaping import (
    LINUX_RTO_MIN_MS,
    ack_allowance_bps,
    burst_bytes,
    line_rate_bps,
    per_source_classes,
    small_packet_filters,
)
from testbed.fabrics.rendering import (
    FORWARD_TABLE,
    PRIORITY_LINK,
    PlanError,
    Rendering,
    neighbour_lines,
    next_hops_over,
    relayed_payload_bps,
    route_line,
)
from testbed.fabrics.sip_ring.wavelengths import ring_hops, segments
from testbed.model.contracts import Topology
from testbed.model.openflow import FlowRule
from testbed.model.topology import RingLayout


def ring_class(dev: str, peer: int, payload_bps: float) -> str:
    rate = int(line_rate_bps(payload_bps))
    burst = burst_bytes(rate)
    return (f"tc class replace dev {dev} parent 1:1 classid 1:{peer + 2:x} htb rate {rate}bit ceil {rate}bit "
            f"burst {burst} cburst {burst}")


def init_lines(topology: Topology) -> dict[int, list[str]]:
    """The neighbour entries, then per host the lightpath classes and their filters: classes hold
    data to their wavelengths; small packets ride on top of B."""
    lines = neighbour_lines(topology)
    rate = int(line_rate_bps(topology.host_rate_bps))
    small = ack_allowance_bps(relayed_payload_bps(topology))
    burst = burst_bytes(rate)
    wave_bps = topology.layout(RingLayout).wavelength_rate_bps
    n, reach = len(topology.hosts), topology.layout(RingLayout).reach
    for host in topology.hosts:
        dev = host.interfaces[0].name
        own = lines[host.rank]
        own += [f"tc qdisc del dev {dev} root",
                f"tc qdisc add dev {dev} root handle 1: htb default ffff",
                f"tc class replace dev {dev} parent 1: classid 1:1 htb rate {rate + small}bit "
                f"ceil {rate + small}bit burst {burst} cburst {burst}",
                f"tc class replace dev {dev} parent 1:1 classid 1:ffff htb rate {small}bit "
                f"ceil {rate + small}bit prio 0"]
        own += small_packet_filters(dev, "1:ffff")
        for peer in topology.hosts:
            if peer is not host:
                own.append(ring_class(dev, peer.rank, wave_bps))
                if ring_hops(host.rank, peer.rank, n) <= reach:  # no lightpath ever goes further
                    own += per_source_classes(dev, peer.rank + 2, n, wave_bps, topology.host_rate_bps)
                own.append(f"tc filter add dev {dev} parent 1: protocol all prio 2 u32 match ether dst "
                           f"{peer.mac} classid 1:{peer.rank + 2:x}")
    return lines


def validate_lightpaths(topology: Topology, lightpaths: dict[tuple[int, int], int]) -> None:
    """Within reach, at most W wavelengths sent and received per node, and the wavelengths fit on
    every ring segment in the shorter direction (the planner's own constraints)."""
    n = len(topology.hosts)
    ring = topology.layout(RingLayout)
    w, reach = ring.wavelengths, ring.reach
    tx, rx = [0] * n, [0] * n
    load: dict[tuple[int, int], int] = {}
    for (src, dst), count in sorted(lightpaths.items()):
        if not (0 <= src < n and 0 <= dst < n) or src == dst:
            raise PlanError(f"lightpath {src}->{dst} must join two different GPUs of 0..{n - 1}")
        if count < 0:
            raise PlanError(f"lightpath {src}->{dst} has a negative wavelength count {count}")
        direction = 1 if (dst - src) % n <= (src - dst) % n else -1
        if ring_hops(src, dst, n) > reach:
            raise PlanError(f"lightpath {src}->{dst} spans {ring_hops(src, dst, n)} hops, beyond the reach of {reach}")
        tx[src] += count
        rx[dst] += count
        for seg in segments(src, dst, direction, n):
            load[(direction, seg)] = load.get((direction, seg), 0) + count
    for node in range(n):
        if tx[node] > w or rx[node] > w:
            raise PlanError(f"GPU {node} would use more than its {w} wavelengths")
    over = [key for key, used in load.items() if used > w]
    if over:
        raise PlanError(f"ring segment {over[0][1]} would carry more than {w} wavelengths in one direction")


def render_lightpaths(topology: Topology, lightpaths: dict[tuple[int, int], int],
                rto_ms: int = LINUX_RTO_MIN_MS) -> Rendering:
    hosts = topology.hosts
    dpid = int(topology.switches[0].dpid)
    wave_bps = topology.layout(RingLayout).wavelength_rate_bps
    live = {pair: c for pair, c in lightpaths.items() if c > 0}
    rules = frozenset(FlowRule(PRIORITY_LINK, (("in_port", s + 1), ("eth_dst", hosts[d].mac)), d + 1,
                               table=FORWARD_TABLE) for (s, d) in live)
    hops, unreachable = next_hops_over(topology, list(live))
    host_lines: dict[int, dict[str, str]] = {}
    for host in hosts:
        src, dev = host.rank, host.interfaces[0].name
        lines = {}
        for peer in hosts:
            if peer is not host:
                # A class without a lightpath carries nothing (no route leads to it and the switch has no
                # rule for it) but keeps one wavelength's rate: HTB then has no token debt to pay off
                # when a lightpath appears.
                lines[f"class {peer.rank}"] = ring_class(dev, peer.rank,
                                                            max(1, live.get((src, peer.rank), 0)) * wave_bps)
        for dst, nh in sorted(hops[src].items()):
            lines[f"route {dst}"] = route_line(hosts[dst].ip, hosts[nh].ip, dev, rto_ms)
        for s, d in unreachable:
            if s == src:
                lines[f"route {d}"] = f"ip route replace unreachable {hosts[d].ip}/32"
        host_lines[src] = lines
    next_hops = {src: {dst: (nh, 0) for dst, nh in own.items()} for src, own in hops.items()}
    return Rendering({dpid: rules}, host_lines, tuple(unreachable), next_hops)

"""Pure rendering of an optical link state as switch rules and host configuration.

A link state maps a link to how much of it exists: for SiP-OCS, `(switch, src, dst) -> 1` per
directed circuit; for SiP-Ring, `(src, dst) -> wavelengths` per lightpath. Switches forward only
along links (port-to-port for circuits, per destination MAC for lightpaths) in table 1; table 0
counts each GPU pair's first-hop traffic, which is the live traffic matrix. Hosts route every
destination over the shortest relay path. Several circuits between one pair act as one link of
their summed rate: the pair's traffic leaves by the first circuit's port, shaped to the sum (one
TCP flow striped packet by packet over several ports is reordered and slows down).

While links retune, a pair the dark state cuts but the new state joins is held, not cut: its
packets wait in the sending host for the new link (an unresolved neighbour queues them, and the
restore resolves it), as a NIC that knows the circuit schedule would. Cut, TCP would stall for a
retransmission timeout (200 ms at least) however short the dark time."""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field

from controller.flat_plan import FlowRule
from testbed.core.shaping import (
    SMALL_PACKET_FILTER,
    ack_allowance_bps,
    burst_bytes,
    htb_commands_small_first,
    line_rate_bps,
)
from testbed.fabrics.all_kinds import KINDS
from testbed.model.contracts import Topology
from testbed.model.topology import OcsLayout, RingLayout
from testbed.network.relay import adjacency, relay_path

PRIORITY_LINK = 100
PRIORITY_COUNT = 100
ETH_TYPE_IPV4 = 0x0800
FORWARD_TABLE = 1
# Held packets wait on a neighbour no host answers: an address of the benchmarking range (RFC 2544),
# one per next hop (a neighbour entry is per interface, so one per next hop serves every port).
HOLD_BASE = ipaddress.IPv4Address("198.18.0.0")
LINUX_RTO_MIN_MS = 200


def rto_min_ms(dark_s: float) -> int:
    """TCP's shortest retransmission timeout on the fabric's routes: Linux's 200 ms, or twice the
    dark time when that is longer (dilated dark times reach a second), so a held packet is not
    taken for a lost one."""
    return max(LINUX_RTO_MIN_MS, math.ceil(2e3 * dark_s))


def _route(dst_ip: str, via: str, dev: str, rto_ms: int) -> str:
    line = f"ip route replace {dst_ip}/32 via {via} dev {dev} onlink"
    return line + (f" rto_min {rto_ms}ms" if rto_ms > LINUX_RTO_MIN_MS else "")


class PlanError(ValueError):
    """A link state the fabric cannot realise (port used twice, unknown host, beyond reach)."""


@dataclass(frozen=True)
class Rendering:
    rules: dict[int, frozenset[FlowRule]]  # dpid -> forwarding rules (table 1)
    host_lines: dict[int, dict[str, str]] = field(default_factory=dict)  # rank -> key -> `ip`/`tc` lines
    unreachable: tuple[tuple[int, int], ...] = ()
    next_hops: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)  # src -> dst -> (hop, port)


@dataclass(frozen=True)
class Hold:
    """A dark rendering whose cut pairs wait for the new one's links: `dark` routes them to an
    unresolved neighbour on the port they will leave by; `release` (before the new routes) resolves
    it to the next hop, which sends what waited; `forget` (after them) removes it again."""

    dark: Rendering
    release: dict[int, tuple[str, ...]]
    forget: dict[int, tuple[str, ...]]


def _ring(topology: Topology) -> RingLayout:
    if topology.ring is None:
        raise PlanError(f"fabric {topology.fabric} has no lightpaths")
    return topology.ring


def _ocs(topology: Topology) -> OcsLayout:
    if topology.ocs is None:
        raise PlanError(f"fabric {topology.fabric} has no circuits")
    return topology.ocs


def hold_address(next_hop: int) -> str:
    return str(HOLD_BASE + next_hop)


def hold(topology: Topology, dark: Rendering, new: Rendering, rto_ms: int = LINUX_RTO_MIN_MS) -> Hold:
    hosts = topology.hosts
    lines = {rank: dict(own) for rank, own in dark.host_lines.items()}
    release: dict[int, list[str]] = {}
    forget: dict[int, list[str]] = {}
    for src, dst in dark.unreachable:
        if dst not in new.next_hops.get(src, {}):
            continue  # cut in the new state too: nothing will come to send it
        hop, port = new.next_hops[src][dst]
        dev, via = hosts[src].interfaces[port].name, hold_address(hop)
        lines.setdefault(src, {})[f"route {dst}"] = _route(hosts[dst].ip, via, dev, rto_ms)
        resolve = f"ip neigh replace {via} lladdr {hosts[hop].interfaces[port].mac} dev {dev} nud permanent"
        if resolve not in release.get(src, []):
            release.setdefault(src, []).append(resolve)
            forget.setdefault(src, []).append(f"ip neigh del {via} dev {dev}")
    held = Rendering(dark.rules, lines, dark.unreachable, dark.next_hops)
    return Hold(held, {r: tuple(v) for r, v in release.items()}, {r: tuple(v) for r, v in forget.items()})


def count_rules(topology: Topology) -> dict[int, list[FlowRule]]:
    """Table 0 of every switch: one counting rule per ordered GPU pair, matched where the source
    enters the fabric (so relayed packets are not counted twice), then on to table 1."""
    rules: dict[int, list[FlowRule]] = {}
    for sw in topology.switches:
        own = []
        for host in topology.hosts:
            port = next((i.port for i in host.interfaces if i.switch == sw.name), None)
            if port is None:
                continue
            for peer in topology.hosts:
                if peer is not host:
                    own.append(FlowRule(PRIORITY_COUNT, (("in_port", port), ("eth_type", ETH_TYPE_IPV4),
                                                         ("ipv4_src", host.ip), ("ipv4_dst", peer.ip)),
                                        out_port=-1, table=0))
        rules[sw.dpid] = own
    return rules


def init_lines(topology: Topology) -> dict[int, list[str]]:
    """Host configuration applied once: neighbour entries for every peer on every interface, the
    striping rules (OCS) or the per-lightpath HTB classes and their filters (ring)."""
    hosts = topology.hosts
    lines: dict[int, list[str]] = {}
    for host in hosts:
        own = []
        for index, intf in enumerate(host.interfaces):
            for peer in hosts:
                if peer is not host:
                    own.append(f"ip neigh replace {peer.ip} lladdr {peer.interfaces[index].mac} "
                               f"dev {intf.name} nud permanent")
        if link_state(topology) == "lightpaths":
            dev = host.interfaces[0].name
            rate = int(line_rate_bps(topology.host_rate_bps))
            small = ack_allowance_bps(relayed_payload_bps(topology))
            burst = burst_bytes(rate)
            # Lightpath classes hold data to their wavelengths; small packets ride on top of B.
            own += [f"tc qdisc del dev {dev} root",
                    f"tc qdisc add dev {dev} root handle 1: htb default ffff",
                    f"tc class replace dev {dev} parent 1: classid 1:1 htb rate {rate + small}bit "
                    f"ceil {rate + small}bit burst {burst} cburst {burst}",
                    f"tc class replace dev {dev} parent 1:1 classid 1:ffff htb rate {small}bit "
                    f"ceil {rate + small}bit prio 0"]
            own.append(f"tc filter add dev {dev} parent 1: protocol ip prio 1 {SMALL_PACKET_FILTER} classid 1:ffff")
            for peer in hosts:
                if peer is not host:
                    own.append(_ring_class(dev, peer.rank, _ring(topology).wavelength_rate_bps))
                    own.append(f"tc filter add dev {dev} parent 1: protocol all prio 2 u32 match ether dst "
                               f"{peer.mac} classid 1:{peer.rank + 2:x}")
        lines[host.rank] = own
    return lines


def relayed_payload_bps(topology: Topology) -> float:
    """Received payload whose acknowledgements a port of a relaying fabric may carry: what every
    GPU receives (a 16-GPU ring on one-way circuits relays 15 flows' acknowledgements through each)."""
    return len(topology.hosts) * topology.host_rate_bps


def _ring_class(dev: str, peer: int, payload_bps: float) -> str:
    rate = int(line_rate_bps(payload_bps))
    burst = burst_bytes(rate)
    return (f"tc class replace dev {dev} parent 1:1 classid 1:{peer + 2:x} htb rate {rate}bit ceil {rate}bit "
            f"burst {burst} cburst {burst}")


def _routes(topology: Topology, pairs: list[tuple[int, int]]) -> tuple[dict[int, dict[int, int]], list]:
    """Next hop from every host to every other one over `pairs` (None-free: unreachable listed apart)."""
    n = len(topology.hosts)
    neighbours = adjacency(n, sorted(pairs))
    hops: dict[int, dict[int, int]] = {g: {} for g in range(n)}
    unreachable = []
    for src in range(n):
        for dst in range(n):
            if src == dst:
                continue
            path = relay_path(neighbours, src, dst)
            if path is None:
                unreachable.append((src, dst))
            else:
                hops[src][dst] = path[1]
    return hops, unreachable


def validate_circuits(topology: Topology, circuits: frozenset[tuple[int, int, int]]) -> None:
    """Each OCS joins a transmit port to at most one receive port and back: a partial permutation."""
    n, q = len(topology.hosts), _ocs(topology).switches
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


def render_ocs(topology: Topology, circuits: frozenset[tuple[int, int, int]],
               rto_ms: int = LINUX_RTO_MIN_MS) -> Rendering:
    hosts = topology.hosts
    dpids = [sw.dpid for sw in topology.switches]
    rules: dict[int, set[FlowRule]] = {dpid: set() for dpid in dpids}
    via: dict[tuple[int, int], list[int]] = {}
    for switch, src, dst in sorted(circuits):
        rules[dpids[switch]].add(FlowRule(PRIORITY_LINK, (("in_port", src + 1),), dst + 1, table=FORWARD_TABLE))
        via.setdefault((src, dst), []).append(switch)
    hops, unreachable = _routes(topology, list(via))
    circuit_bps = _ocs(topology).circuit_rate_bps
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
                                               relayed_payload_bps(topology))[1:4]
            lines[f"rate {q}"] = "\n".join(shaping)
        for dst, nh in sorted(hops[src].items()):
            port = host.interfaces[via[(src, nh)][0]].name
            lines[f"route {dst}"] = _route(hosts[dst].ip, hosts[nh].ip, port, rto_ms)
        for s, d in unreachable:
            if s == src:
                lines[f"route {d}"] = f"ip route replace unreachable {hosts[d].ip}/32"
        host_lines[src] = lines
    next_hops = {src: {dst: (nh, via[(src, nh)][0]) for dst, nh in own.items()} for src, own in hops.items()}
    return Rendering({d: frozenset(r) for d, r in rules.items()}, host_lines, tuple(unreachable), next_hops)


def validate_lightpaths(topology: Topology, lightpaths: dict[tuple[int, int], int]) -> None:
    """Within reach, at most W wavelengths sent and received per node, and the wavelengths fit on
    every ring segment in the shorter direction (the planner's own constraints)."""
    from testbed.fabrics.sip_ring.wavelengths import segments

    n = len(topology.hosts)
    ring = _ring(topology)
    w, reach = ring.wavelengths, ring.reach
    tx, rx = [0] * n, [0] * n
    load: dict[tuple[int, int], int] = {}
    for (src, dst), count in sorted(lightpaths.items()):
        if not (0 <= src < n and 0 <= dst < n) or src == dst:
            raise PlanError(f"lightpath {src}->{dst} must join two different GPUs of 0..{n - 1}")
        if count < 0:
            raise PlanError(f"lightpath {src}->{dst} has a negative wavelength count {count}")
        hops_cw, hops_ccw = (dst - src) % n, (src - dst) % n
        direction = 1 if hops_cw <= hops_ccw else -1
        if min(hops_cw, hops_ccw) > reach:
            raise PlanError(f"lightpath {src}->{dst} spans {min(hops_cw, hops_ccw)} hops, beyond the reach of {reach}")
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


def render_ring(topology: Topology, lightpaths: dict[tuple[int, int], int],
                rto_ms: int = LINUX_RTO_MIN_MS) -> Rendering:
    hosts = topology.hosts
    dpid = int(topology.switches[0].dpid)
    wave_bps = _ring(topology).wavelength_rate_bps
    live = {pair: c for pair, c in lightpaths.items() if c > 0}
    rules = frozenset(FlowRule(PRIORITY_LINK, (("in_port", s + 1), ("eth_dst", hosts[d].mac)), d + 1,
                               table=FORWARD_TABLE) for (s, d) in live)
    hops, unreachable = _routes(topology, list(live))
    host_lines: dict[int, dict[str, str]] = {}
    for host in hosts:
        src, dev = host.rank, host.interfaces[0].name
        lines = {}
        for peer in hosts:
            if peer is not host:
                # A class without a lightpath carries nothing (no route leads to it and the switch has no
                # rule for it) but keeps one wavelength's rate: HTB then has no token debt to pay off
                # when a lightpath appears.
                lines[f"class {peer.rank}"] = _ring_class(dev, peer.rank,
                                                            max(1, live.get((src, peer.rank), 0)) * wave_bps)
        for dst, nh in sorted(hops[src].items()):
            lines[f"route {dst}"] = _route(hosts[dst].ip, hosts[nh].ip, dev, rto_ms)
        for s, d in unreachable:
            if s == src:
                lines[f"route {d}"] = f"ip route replace unreachable {hosts[d].ip}/32"
        host_lines[src] = lines
    next_hops = {src: {dst: (nh, 0) for dst, nh in own.items()} for src, own in hops.items()}
    return Rendering({dpid: rules}, host_lines, tuple(unreachable), next_hops)


def link_state(topology: Topology) -> str:
    """What the fabric's controller sets: "circuits" or "lightpaths" (the registry says)."""
    kind = KINDS[topology.fabric].link_state
    if kind is None:
        raise PlanError(f"fabric {topology.fabric} has no circuits or lightpaths to plan")
    return kind


def render(topology: Topology, state: dict, rto_ms: int = LINUX_RTO_MIN_MS) -> Rendering:
    if link_state(topology) == "circuits":
        return render_ocs(topology, frozenset(key for key, c in state.items() if c > 0), rto_ms)
    return render_ring(topology, state, rto_ms)


def validate(topology: Topology, state: dict) -> None:
    if link_state(topology) == "circuits":
        validate_circuits(topology, frozenset(key for key, c in state.items() if c > 0))
    else:
        validate_lightpaths(topology, state)

"""What the rule plans of reconfigurable fabrics share: a link state rendered as switch rules and
host configuration, the hold that carries cut pairs over a dark time, the counting rules that
measure the traffic matrix, and routes over relays. Pure; each kind's `rules.py` renders its own
link state (circuits, lightpaths) with these pieces.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from testbed.core.shaping import LINUX_RTO_MIN_MS
from testbed.model.contracts import Topology
from testbed.model.openflow import FlowRule
from testbed.network.relay import adjacency, next_hops_to

PRIORITY_LINK = 100
PRIORITY_COUNT = 100
ETH_TYPE_IPV4 = 0x0800
FORWARD_TABLE = 1
# Held packets wait on a neighbour no host answers: an address of the benchmarking range (RFC 2544),
# one per next hop (a neighbour entry is per interface, so one per next hop serves every port).
HOLD_BASE = ipaddress.IPv4Address("198.18.0.0")


# A retune can cut a lightpath or circuit to fewer wavelengths under a full queue, or move a flow
# onto a relayed path behind other traffic: its packets' round trip jumps by more than Linux's
# srtt + 4·rttvar allows, and TCP times out although nothing was lost. The Transformer on 16 SiP-Ring
# GPUs (dilation 411, a wavelength ~2 Mb/s of wall rate) timed out 26-57 times an iteration, every
# retransmission reported back as a duplicate (DSACK) and no packet dropped anywhere; with 2 s, none.
# The fabric intends no loss, so the longer timeout costs nothing unless the machine drops packets
# (which the drops and retransmissions monitors report).
RETUNED_RTO_MIN_MS = 2000


def rto_min_ms(dark_s: float) -> int:
    """TCP's shortest retransmission timeout on a re-planned fabric's routes: long enough for a
    retune's jump in queueing delay, and twice the dark time when that is longer (dilated dark
    times reach seconds), so a held or queued packet is not taken for a lost one."""
    return max(RETUNED_RTO_MIN_MS, math.ceil(2e3 * dark_s))


def route_line(dst_ip: str, via: str, dev: str, rto_ms: int) -> str:
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
        lines.setdefault(src, {})[f"route {dst}"] = route_line(hosts[dst].ip, via, dev, rto_ms)
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


def neighbour_lines(topology: Topology) -> dict[int, list[str]]:
    """Host configuration applied once on every reconfigurable fabric: a neighbour entry for every
    peer on every interface (a kind's rule plan adds its own, e.g. SiP-Ring's lightpath classes)."""
    hosts = topology.hosts
    lines: dict[int, list[str]] = {}
    for host in hosts:
        lines[host.rank] = [f"ip neigh replace {peer.ip} lladdr {peer.interfaces[index].mac} dev {intf.name} "
                            "nud permanent"
                            for index, intf in enumerate(host.interfaces) for peer in hosts if peer is not host]
    return lines


def relayed_payload_bps(topology: Topology) -> float:
    """Received payload whose acknowledgements a port of a relaying fabric may carry: what every
    GPU receives (a 16-GPU ring on one-way circuits relays 15 flows' acknowledgements through each)."""
    return len(topology.hosts) * topology.host_rate_bps


def next_hops_over(topology: Topology,
                   pairs: list[tuple[int, int]]) -> tuple[dict[int, dict[int, int]], list[tuple[int, int]]]:
    """Next hop from every host to every other one over `pairs` (None-free: unreachable listed apart)."""
    n = len(topology.hosts)
    neighbours = adjacency(n, pairs)
    hops: dict[int, dict[int, int]] = {g: {} for g in range(n)}
    unreachable = []
    for dst in range(n):
        towards = next_hops_to(neighbours, dst)
        for src in range(n):
            if src == dst:
                continue
            if src in towards:
                hops[src][dst] = towards[src]
            else:
                unreachable.append((src, dst))
    return hops, sorted(unreachable)




@dataclass(frozen=True)
class LinkRules:
    """A reconfigurable kind's rule plan: what its link state is called, how a state is checked
    (raising PlanError) and rendered, and the host configuration it adds once at start."""

    # "circuits" `(switch, src, dst) -> 1` or "lightpaths" `(src, dst) -> wavelengths`: what the
    # controller sets and the northbound API takes
    link_state: Literal["circuits", "lightpaths"]
    validate: Callable[[Topology, dict[Any, int]], None]
    render: Callable[[Topology, dict[Any, int], int], Rendering]
    # plan(topology, fabric, traffic, recurring pairs to keep, state in force or None, dark_s): the
    # state for a traffic matrix, changed from the one in force only where the oracle's re-plan would
    plan: Callable[[Topology, Any, dict[tuple[int, int], float], tuple[tuple[int, int], ...],
                    dict[Any, int] | None, float], dict[Any, int]]
    init_lines: Callable[[Topology], dict[int, list[str]]] = neighbour_lines
    # A state key's (src, dst) pair, and the key moved `offset` switches on (a partitioned job's
    # plan is made on switches from 0 and set on its own)
    pair_of: Callable[[Any], tuple[int, int]] = lambda key: (key[0], key[1])
    shift: Callable[[Any, int], Any] = lambda key, offset: key

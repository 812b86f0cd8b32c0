"""What a built topology's hosts and switch ports are configured with, as shell commands: TCP
settings, offloads, shaping (host side, switch-to-switch, and into hosts where the kind says),
and relaying on routed fabrics. Pure: the Mininet shim runs them, unit tests read them."""

from __future__ import annotations

from testbed.core.shaping import (
    INTO_HOST_BURST_BYTES,
    LINUX_RTO_MIN_MS,
    LOSSLESS_QUEUE_PACKETS,
    htb_commands_small_first,
    offload_command,
    transport_command,
)
from testbed.fabrics.all_kinds import KINDS
from testbed.model.contracts import Topology

# Hosts of fabrics with relaying (GPUs forward for each other) route by the controller's plan only.
RELAY_SYSCTLS = ("net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
                 "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.all.accept_redirects=0",
                 "net.ipv4.conf.default.send_redirects=0", "net.ipv4.conf.default.accept_redirects=0")

# A retune moves a flow's route to another interface while its packets still queue on the old
# one: later packets overtake them, and TCP read the gap as loss (RACK after a quarter of the
# shortest round trip, then three duplicate acknowledgements), entering fast recovery about ten
# times per retune with nothing lost (the originals were still in the host's queue) and halving
# its window each time. Loss is judged by reordering degree alone, as tolerant as Linux allows:
# the fabric intends no loss, and a real one still ends in the routes' timeout, which the
# retransmission monitor prices. Reno, not the machine's default: a paced controller (BBR) probes
# for a retune's added capacity over several round trips, a window uses it at once (see
# testbed/core/shaping.py).
REORDERING_SYSCTLS = ("net.ipv4.tcp_recovery=0", "net.ipv4.tcp_reordering=300")

# Packets held while a link retunes wait on an unresolved neighbour (testbed/fabrics/rendering.py):
# room for every flow's window, and probes that outlast any dark time (100 s; no one answers).
HOLD_SYSCTLS = ("unres_qlen_bytes=33554432", "mcast_solicit=100", "retrans_time_ms=1000")


def host_commands(topology: Topology) -> dict[str, list[str]]:
    """Per host name, what to run in it once the network is up (switched and routed fabrics)."""
    routed = KINDS[topology.fabric].routed
    out: dict[str, list[str]] = {}
    for host in topology.hosts:
        commands = [transport_command()]
        if routed:
            commands.append("sysctl -qw " + " ".join(RELAY_SYSCTLS + REORDERING_SYSCTLS))
        for intf in host.interfaces:
            commands.append(offload_command(intf.name, topology.segments_per_packet))
            # Acknowledgements of the flows this host receives leave through the same queue as
            # its own data: small packets first, or a host that sends and receives at once
            # (every collective but a broadcast) throttles what it receives.
            commands += htb_commands_small_first(intf.name, intf.payload_rate_bps,
                                                 queue_packets=LOSSLESS_QUEUE_PACKETS)
            if routed:
                dev = intf.name.replace('.', '/')
                commands.append(f"sysctl -qw net.ipv4.conf.{dev}.rp_filter=0 "
                                + " ".join(f"net.ipv4.neigh.{dev}.{s}" for s in HOLD_SYSCTLS))
                if intf is not host.interfaces[0]:
                    commands.append(f"ip addr add {host.ip}/32 dev {intf.name}")
        if routed:  # no path until the controller plans one: drop the subnet route
            commands.append(f"ip route del 10.0.0.0/8 dev {host.interfaces[0].name}")
        elif topology.rto_min_ms > LINUX_RTO_MIN_MS:  # the controller renders routed fabrics' own
            commands.append(f"ip route replace 10.0.0.0/8 dev {host.interfaces[0].name} proto kernel "
                            f"scope link src {host.ip} rto_min {topology.rto_min_ms}ms")
        out[host.name] = commands
    return out


def switch_port_shaping(topology: Topology) -> list[str]:
    """Root-namespace commands that shape the switch ends of links: both ends of a switch-to-switch
    link, and where the kind says so the port that sends into each host."""
    shaping: list[str] = []
    for link in topology.links:
        into_host = False
        if link.peer_switch is not None:  # switch-to-switch links are shaped at both switch ports
            ends = link.switch_ends()
        elif link.switch is not None and KINDS[topology.fabric].shaped_into_hosts:
            # A host's link on a switched fabric is also shaped where the switch sends into it:
            # what arrives at a NIC is bounded by B however many peers send to it at once (a
            # gather, a parameter server's push), as on the fabric; the host side bounds what
            # it sends (KindSpec.shaped_into_hosts says on which kinds).
            ends = link.switch_ends()
            into_host = True
        else:
            ends = []
        for end in ends:
            # Acknowledgements of the other direction's flow share this queue: small first.
            shaping += [offload_command(end) + " >/dev/null 2>&1"] + htb_commands_small_first(
                end, link.payload_rate_bps, burst=INTO_HOST_BURST_BYTES if into_host else None,
                queue_packets=LOSSLESS_QUEUE_PACKETS if into_host else None)
    return shaping

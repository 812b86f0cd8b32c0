"""tc commands that shape a host's egress to the emulated rate (HTB on the host side of each link)."""

from __future__ import annotations

import math

from testbed.model.units import bits_to_bytes
from testbed.shared.wire import CONTROL_TOS

MTU_FRAME_BYTES = 1514
# A full TCP segment carries 1448 payload bytes in a 1514-byte frame (Ethernet 14, IPv4 20, TCP with
# timestamps 32). The oracle's B is payload bandwidth, so links are shaped to carry B of payload.
TCP_PAYLOAD_BYTES = 1448
# Bucket depth: about 1 ms at the shaped rate, but never below two full frames.
BURST_WINDOW_S = 1e-3
# Measured here (veth, 40-184 Mb/s): whatever burst HTB is given, a TCP message sent after an
# idle moment gets about this many bytes ahead of the shaped rate (a 116 KB message at 84 Mb/s
# arrived in 6-7 ms, not 11.6; TBF keeps to its burst but under CPU load delivers 10-30% less).
HTB_IDLE_BURST_BYTES = 50_000
# The switch port into a host is shaped too (a NIC receives at most B, whoever sends), with a
# deeper bucket than the host's own: one sender's traffic, already held to B, passes it unqueued,
# while several at once (incast) are held to B once it drains.
INTO_HOST_BURST_BYTES = 64 * 1024
# Shaped data queues are deeper than a NIC's 1,000 frames: the fabric the oracle models is
# lossless (a gather's seven senders are paused, not dropped), while here every sender's whole
# window lands in the port into the receiver at once (seven 262 KB messages, 1,267 frames, lost
# 13 frames into a 1,000-frame queue and waited out retransmission timeouts), and a host that
# sends to many at once (a scatter to 15) queues every socket's allowance in its own. The frames
# are copies the senders' windows bound, so the depth costs memory only while a queue is full.
LOSSLESS_QUEUE_PACKETS = 20_000

# Every host's transport, whatever the machine's default: the alpha-beta model has no slow start,
# and a connection idle since the last iteration (every all-to-all peer, every pipeline stage)
# would start each message in it; and one congestion control, so that flows sharing a link share
# it as the oracle does (equally). Reno: two jobs' rings on shared uplinks came out 1.00-1.02 of
# the equal share with it, 0.78-1.07 with BBR (a paced controller's share depends on its
# probing), and a retune's added capacity is used at once; and Reno is the one every network
# namespace may choose.
TRANSPORT_SYSCTLS = ("net.ipv4.tcp_slow_start_after_idle=0", "net.ipv4.tcp_congestion_control=reno")


# Linux's shortest retransmission timeout, which a route's rto_min raises.
LINUX_RTO_MIN_MS = 200


def queued_rto_min_ms(queue_wall_s: float) -> int:
    """TCP's shortest retransmission timeout on a switched fabric's host routes, given the longest
    a host's queue of its own messages takes to drain at its dilated rate (wall seconds).

    A host that sends many messages at once (a scatter's root, an all-to-all) queues them all in
    its shaped link, which at the dilated rate takes long in wall time: the 16-GPU scatter's root
    queued 15 messages of 256 KB at 43 Mb/s, 0.73 s, and connections that had seen only short
    round trips timed out after 200 ms with nothing lost (their retransmitted segments came back
    as duplicates, DSACK). Twice the longest queue: the fabric the oracle models has no timeout
    (the real queue drains in 79 µs), and a real loss still ends in this timeout, which the
    retransmission monitor prices."""
    return max(LINUX_RTO_MIN_MS, math.ceil(2e3 * queue_wall_s))


def transport_command() -> str:
    """The sysctl line every emulated host runs before it opens a connection."""
    return "sysctl -qw " + " ".join(TRANSPORT_SYSCTLS)


def burst_bytes(rate_bps: float) -> int:
    return max(2 * MTU_FRAME_BYTES, int(bits_to_bytes(rate_bps * BURST_WINDOW_S)))


def line_rate_bps(payload_rate_bps: float) -> float:
    """Frame rate HTB must allow so that full-sized TCP segments carry payload_rate_bps of payload."""
    return payload_rate_bps * MTU_FRAME_BYTES / TCP_PAYLOAD_BYTES


def htb_commands(interface: str, payload_rate_bps: float) -> list[str]:
    """Commands (run inside the host) replacing the root qdisc with one HTB class that carries
    payload_rate_bps of TCP payload."""
    rate = int(round(line_rate_bps(payload_rate_bps)))
    burst = burst_bytes(rate)
    return [
        f"tc qdisc replace dev {interface} root handle 1: htb default 1",
        f"tc class replace dev {interface} parent 1: classid 1:1 htb rate {rate}bit ceil {rate}bit "
        f"burst {burst} cburst {burst}",
    ]


# The kernel's TCP keeps building GSO super-packets (up to 45 segments, 64 KB) even where the
# device has gso off: they are cut into frames only after the qdisc, so HTB lets one through at
# once and then waits it off, and a message ends up to a super-packet / rate early (a quarter of a
# 1 MiB message on one 25 Gb/s wavelength: a SiP-Ring reduce came out 0.88 of predicted). On
# routed fabrics (lightpaths, circuits), whose host classes carry a fraction of B and are the last
# shaping their traffic meets, a packet holds at most SUPER_PACKET_SHARE of the run's smallest
# message. Not fewer segments than that: each costs CPU (one segment per packet made a SiP-Ring
# ring's steps 2-4% slow at 52% CPU, five 1.2-1.6% at 45%). On switched fabrics the port into the
# receiver re-shapes frame by frame (single segments there took a 100 MB ring all-reduce on 8 GPUs
# of Elect-Flat from 1.02 to 1.13-1.33 of predicted).
SUPER_PACKET_SHARE = 0.01
MAX_SEGMENTS_PER_PACKET = 45  # the kernel's own limit for a 64 KB packet of full segments


def segments_per_packet(smallest_message_bytes: float) -> int:
    """Full segments a packet handed to a routed fabric's host qdisc may hold."""
    return int(min(MAX_SEGMENTS_PER_PACKET, max(1, smallest_message_bytes * SUPER_PACKET_SHARE // TCP_PAYLOAD_BYTES)))


def offload_command(interface: str, segments_per_packet: int = 0) -> str:
    """Userspace OVS forwards TCP only with checksum and segmentation offloads off; with
    `segments_per_packet`, TCP's packets are held to that many segments (0: the kernel's 45)."""
    offloads = f"ethtool -K {interface} rx off tx off sg off tso off gso off gro off"
    if not segments_per_packet:
        return offloads
    return f"{{ {offloads} && ip link set dev {interface} gso_max_segs {segments_per_packet}; }}"


# What rides in the small class: IPv4 packets below 256 bytes, but of TCP only those without PSH
# (acknowledgements, not data), and whatever a receiver sends back on its connections (marked
# CONTROL_TOS: acknowledgements and delivery stamps). The last segment of every message is also
# short and carries PSH: let it overtake its own message's queued segments and the receiver sees
# a hole, acknowledges out of order and has the sender retransmit what was only queued (a 7-to-1
# gather: 58 segments an iteration, all spurious, 5% of what the port carried).
SMALL_PACKET_FILTERS = (
    "u32 match u16 0x0000 0xff00 at 2 match u8 0x06 0xff at 9 match u8 0x00 0x08 at 33",  # TCP
    "u32 match u16 0x0000 0xff00 at 2 match u8 0x11 0xff at 9",  # UDP
    "u32 match u16 0x0000 0xff00 at 2 match u8 0x01 0xff at 9",  # ICMP
    f"u32 match u8 0x{CONTROL_TOS:02x} 0xfc at 1",  # a receiver's answers
)


def small_packet_filters(interface: str, classid: str) -> list[str]:
    """tc filter lines that send SMALL_PACKET_FILTERS' packets to `classid`, at priority 1, the
    first filters of the qdisc (hash table 800:). Each has its own handle, so re-shaping a port
    replaces them rather than adding copies."""
    return [f"tc filter replace dev {interface} parent 1: protocol ip prio 1 handle 800::{n:x} {match} "
            f"classid {classid}" for n, match in enumerate(SMALL_PACKET_FILTERS, start=1)]

# Linux acknowledges about every second full segment with a 66-byte frame (Ethernet 14, IPv4 20,
# TCP with timestamps 32); headroom for quick-ack phases and a sender's own small packets.
ACK_FRAME_BYTES = 66
SEGMENTS_PER_ACK = 2
ACK_HEADROOM = 2.0
MIN_SMALL_CLASS_BPS = 8000


def ack_allowance_bps(acknowledged_payload_bps: float) -> int:
    """Frame rate the acknowledgements of `acknowledged_payload_bps` of received payload need."""
    per_payload_byte = ACK_FRAME_BYTES / (SEGMENTS_PER_ACK * TCP_PAYLOAD_BYTES)
    return max(MIN_SMALL_CLASS_BPS, int(acknowledged_payload_bps * per_payload_byte * ACK_HEADROOM))


# A host's own connections and the flows it relays share each of its links, as the oracle shares
# them: equally (max-min). In one FIFO they do not: TCP Small Queues keeps an own connection to
# about two segments in the qdisc while a relayed flow arrives with its sender's whole window (it
# took 75-80% of a lightpath), and of several relayed flows the ones whose windows happen to be
# queued first finish first (a 16-GPU binomial reduce relays five 8-hop flows over the same
# lightpaths: they ended at 514-1,342 us where the oracle has all end at 1,342, and the reduce ran
# 0.86 of predicted). So a lightpath's class has a child per source: equal floors and quanta share
# it round-robin among the sources that have data, any one alone takes all of it. Sources are told
# apart by the low bits of their address's last octet (ranks are numbered consecutively): exact up
# to SOURCE_BUCKETS GPUs, sources a multiple of it apart share a child beyond.
SOURCE_BUCKETS = 16
SOURCE_MINOR = 0x4000  # a child's minor: SOURCE_MINOR + parent minor * buckets + bucket


def source_buckets(hosts: int) -> int:
    """Children per shared class: a power of two covering `hosts` sources, at most SOURCE_BUCKETS."""
    buckets = 1
    while buckets < min(hosts, SOURCE_BUCKETS):
        buckets *= 2
    return buckets


def per_source_classes(interface: str, parent_minor: int, hosts: int, floor_bps: float, ceil_bps: float,
                       queue_packets: int = LOSSLESS_QUEUE_PACKETS) -> list[str]:
    """Commands (run once) splitting HTB class 1:`parent_minor` into a child per source of `hosts`
    (by the low bits of the IPv4 source's last octet), each guaranteed an equal part of `floor_bps`
    (the least the parent ever carries, so the guarantees never exceed it) and allowed up to
    `ceil_bps`; the parent's own rate bounds them together."""
    buckets = source_buckets(hosts)
    floor = max(MIN_SMALL_CLASS_BPS, int(line_rate_bps(floor_bps) / buckets))
    ceil = int(line_rate_bps(ceil_bps))
    first = SOURCE_MINOR + parent_minor * buckets
    if first + buckets - 1 >= 0xFFFF:  # 1:ffff is the small packets' class
        raise ValueError(f"class 1:{parent_minor:x} has no room for {buckets} per-source children")
    lines = []
    for bucket in range(buckets):
        minor = first + bucket
        lines += [f"tc class replace dev {interface} parent 1:{parent_minor:x} classid 1:{minor:x} htb rate {floor}bit "
                  f"ceil {ceil}bit burst {burst_bytes(floor)} cburst {burst_bytes(ceil)} quantum {MTU_FRAME_BYTES}",
                  f"tc qdisc replace dev {interface} parent 1:{minor:x} handle {minor:x}: pfifo limit {queue_packets}",
                  # byte 15 of the IPv4 header: the last octet of the source address
                  f"tc filter add dev {interface} parent 1:{parent_minor:x} protocol ip prio 1 u32 "
                  f"match u8 0x{bucket:02x} 0x{buckets - 1:02x} at 15 classid 1:{minor:x}"]
    # whatever is not IPv4 (ARP) joins the first child rather than falling to the default class
    return lines + [f"tc filter add dev {interface} parent 1:{parent_minor:x} protocol all prio 2 u32 match u32 0 0 "
                    f"classid 1:{first:x}"]


def htb_commands_small_first(interface: str, payload_rate_bps: float,
                             acknowledged_payload_bps: float | None = None, burst: int | None = None,
                             queue_packets: int | None = None) -> list[str]:
    """Like htb_commands, with small packets (acknowledgements) in a class of their own that rides
    on top of the link's B and goes ahead of queued data.

    B is the payload bandwidth of the fabric the oracle models, whose transports (RDMA) spend
    almost nothing on acknowledgements. TCP's take 2-3% of a flow's bytes in the other direction,
    and on a relaying fabric (one-way OCS circuits) a port carries those of every flow relayed
    through it: 30% of the data bytes of a 16-GPU ring, measured. So data is held to exactly B
    (class 1:10) and acknowledgements get their own allowance for `acknowledged_payload_bps` of
    received payload (class 1:5, by default the link's own rate). Small first, because a host that
    sends while it receives would otherwise hold the acknowledgements of what it receives behind its
    own full queue. `burst` is the buckets' depth in bytes (by default burst_bytes of the rate);
    `queue_packets` the data queue's depth (by default the interface's, 1,000 frames)."""
    rate = int(round(line_rate_bps(payload_rate_bps)))
    small = ack_allowance_bps(payload_rate_bps if acknowledged_payload_bps is None else acknowledged_payload_bps)
    burst = burst or burst_bytes(rate)
    return [
        f"tc qdisc replace dev {interface} root handle 1: htb default 10",
        f"tc class replace dev {interface} parent 1: classid 1:1 htb rate {rate + small}bit ceil {rate + small}bit "
        f"burst {burst} cburst {burst}",
        f"tc class replace dev {interface} parent 1:1 classid 1:10 htb rate {rate}bit ceil {rate}bit "
        f"burst {burst} cburst {burst} prio 1",
        f"tc class replace dev {interface} parent 1:1 classid 1:5 htb rate {small}bit ceil {rate + small}bit "
        f"burst {burst} cburst {burst} prio 0",
        *small_packet_filters(interface, "1:5"),
        *([f"tc qdisc replace dev {interface} parent 1:10 handle 10: pfifo limit {queue_packets}"]
          if queue_packets else []),
    ]

"""Which packets ride in the shaping's small class, read from the tc u32 matches against packets
scapy builds: acknowledgements go ahead of queued data, a message's short last segment does not
(it would overtake its own message and make the receiver report a hole)."""

from __future__ import annotations

from scapy.layers.inet import ICMP, IP, TCP, UDP

from testbed.core.shaping import SMALL_PACKET_FILTERS, small_packet_filters
from testbed.shared.wire import CONTROL_TOS

WIDTH = {"u8": 1, "u16": 2, "u32": 4}


def _matches(u32: str, packet: bytes) -> bool:
    """tc's u32 classifier: every `match uN VALUE MASK at OFFSET` holds, offsets from the IP header."""
    words = u32.split()
    assert words[0] == "u32"
    checks = [words[i:i + 6] for i in range(1, len(words), 6)]
    for match, width, value, mask, at, offset in checks:
        assert (match, at) == ("match", "at")
        start = int(offset)
        field = int.from_bytes(packet[start:start + WIDTH[width]], "big")
        if field & int(mask, 16) != int(value, 16) & int(mask, 16):
            return False
    return True


def _small(packet) -> bool:
    raw = bytes(packet)
    return any(_matches(f, raw) for f in SMALL_PACKET_FILTERS)


TIMESTAMPS = [("NOP", None), ("NOP", None), ("Timestamp", (1, 2))]


def test_acknowledgements_delivery_stamps_and_small_datagrams_go_first():
    assert _small(IP(dst="10.0.0.2") / TCP(flags="A", options=TIMESTAMPS))
    sack = TIMESTAMPS + [("NOP", None), ("NOP", None), ("SAck", (100, 200, 300, 400))]
    assert _small(IP(dst="10.0.0.2") / TCP(flags="A", options=sack))
    assert _small(IP(dst="10.0.0.2") / TCP(flags="S"))
    assert _small(IP(dst="10.0.0.2") / UDP(dport=9) / (b"x" * 100))
    assert _small(IP(dst="10.0.0.2") / ICMP())


def test_data_stays_in_order_behind_its_message():
    tail = IP(dst="10.0.0.2") / TCP(flags="PA", options=TIMESTAMPS) / (b"x" * 56)  # 262,144 B's last
    assert len(tail) < 256 and not _small(tail)
    assert _small(IP(dst="10.0.0.2", tos=CONTROL_TOS) / TCP(flags="PA", options=TIMESTAMPS) / (b"x" * 8))
    assert not _small(IP(dst="10.0.0.2") / TCP(flags="A", options=TIMESTAMPS) / (b"x" * 1448))
    assert not _small(IP(dst="10.0.0.2") / UDP(dport=9) / (b"x" * 1000))


def test_reshaping_a_port_replaces_its_filters():
    lines = small_packet_filters("h1-eth0", "1:5")
    assert all(line.startswith("tc filter replace") and " handle 800::" in line for line in lines)
    assert len({line.split(" handle ")[1].split()[0] for line in lines}) == len(SMALL_PACKET_FILTERS)

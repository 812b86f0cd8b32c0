"""A lightpath's HTB class is split between its host's own traffic and relayed traffic: the two
guarantees fit within the least the lightpath carries (HTB lets a class under its guarantee send
whatever its parent's state), each may use the whole host rate, and the host's own address picks
the own class."""

from __future__ import annotations

import re

from testbed.core.shaping import line_rate_bps, own_and_relayed_classes


def test_guarantees_fit_in_one_wavelength_and_the_source_address_picks_the_class():
    wave_bps, host_bps = 15.4e6, 61.7e6
    lines = own_and_relayed_classes("h3-eth0", 0x5, "10.0.0.3", wave_bps, host_bps)
    classes = [line for line in lines if line.startswith("tc class")]
    assert [re.search(r"classid (\S+)", c).group(1) for c in classes] == ["1:4005", "1:8005"]
    assert all(" parent 1:5 " in c for c in classes)
    rates = [int(re.search(r" rate (\d+)bit", c).group(1)) for c in classes]
    ceils = [int(re.search(r" ceil (\d+)bit", c).group(1)) for c in classes]
    assert sum(rates) <= line_rate_bps(wave_bps) and rates[0] == rates[1]
    assert ceils == [int(line_rate_bps(host_bps))] * 2
    filters = [line for line in lines if line.startswith("tc filter")]
    assert "match ip src 10.0.0.3/32 classid 1:4005" in filters[0] and " prio 1 " in filters[0]
    assert "match u32 0 0 classid 1:8005" in filters[1] and " prio 2 " in filters[1]
    assert sum("pfifo limit" in line for line in lines) == 2


def test_a_packet_holds_at_most_a_hundredth_of_the_smallest_message():
    """A 258,804 B message (1 MiB reduce at byte scale 0.247): one 1,448 B segment per packet; a
    750,740 B ring step: five (7,507 B); 64 KB messages still one; huge ones the kernel's 45."""
    from testbed.core.shaping import offload_command, segments_per_packet

    assert segments_per_packet(258_804) == 1
    assert segments_per_packet(750_740) == 5
    assert segments_per_packet(65_536) == 1
    assert segments_per_packet(1e9) == 45
    assert offload_command("h1-eth0", 5).endswith("&& ip link set dev h1-eth0 gso_max_segs 5; }")
    assert "gso_max_segs" not in offload_command("h1-eth0")

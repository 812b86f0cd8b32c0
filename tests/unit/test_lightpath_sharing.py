"""A lightpath's HTB class is split into a child per source: the guarantees fit within the least
the lightpath carries (HTB lets a class under its guarantee send whatever its parent's state), each
may use the whole host rate, and the source address's last octet picks the child."""

from __future__ import annotations

import re

import pytest

from testbed.core.shaping import line_rate_bps, per_source_classes, source_buckets


def test_a_child_per_source_whose_guarantees_fit_in_one_wavelength():
    wave_bps, host_bps = 15.4e6, 61.7e6
    lines = per_source_classes("h3-eth0", 0x5, 8, wave_bps, host_bps)
    classes = [line for line in lines if line.startswith("tc class")]
    # 8 sources: 8 children, minors 0x4000 + 5 * 8 + bucket
    assert [re.search(r"classid (\S+)", c).group(1) for c in classes] == [f"1:{0x4028 + b:x}" for b in range(8)]
    assert all(" parent 1:5 " in c for c in classes)
    rates = [int(re.search(r" rate (\d+)bit", c).group(1)) for c in classes]
    ceils = [int(re.search(r" ceil (\d+)bit", c).group(1)) for c in classes]
    assert sum(rates) <= line_rate_bps(wave_bps) and len(set(rates)) == 1
    assert ceils == [int(line_rate_bps(host_bps))] * 8
    filters = [line for line in lines if line.startswith("tc filter")]
    # GPU 5's address is 10.0.0.6: last octet 6, bucket 6 of mask 7, at byte 15 of the IPv4 header
    assert "match u8 0x06 0x07 at 15 classid 1:402e" in filters[6] and " prio 1 " in filters[6]
    assert "match u32 0 0 classid 1:4028" in filters[-1] and " prio 2 " in filters[-1]
    assert sum("pfifo limit" in line for line in lines) == 8


@pytest.mark.parametrize(("hosts", "buckets"), [(2, 2), (3, 4), (8, 8), (9, 16), (16, 16), (128, 16)])
def test_sources_are_told_apart_up_to_sixteen_gpus(hosts, buckets):
    assert source_buckets(hosts) == buckets
    # consecutive addresses 1..hosts fall in distinct children while there are no more than buckets
    assert len({(rank + 1) % buckets for rank in range(hosts)}) == min(hosts, buckets)


def test_a_class_without_room_for_its_children_is_refused():
    with pytest.raises(ValueError, match="no room"):
        per_source_classes("h1-eth0", 0xBFF, 16, 1e6, 4e6)


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

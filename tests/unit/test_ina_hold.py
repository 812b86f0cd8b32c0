"""The INA receivers' link hold: each packet released its frame time(s) after it arrived, so a
one-frame token bucket delivering at once acts as a store-and-forward link."""

from __future__ import annotations

import time

import numpy as np
import pytest

from hosts.ina.hold import UDP_FRAME_OVERHEAD_BYTES, LinkHold
from hosts.ina.protocol import FRAME_BYTES, HEADER_BYTES, PAYLOAD_BYTES
from tests.unit.ina_loopback import loopback_node, run_jobs


def test_a_full_frame_is_held_its_time_on_the_link():
    # 1,508 bytes at 12.064 Mb/s: 1,508 · 8 / 12.064e6 = 1.0 ms.
    hold = LinkHold(12.064e6)
    datagram = HEADER_BYTES + PAYLOAD_BYTES
    assert datagram + UDP_FRAME_OVERHEAD_BYTES == FRAME_BYTES
    hold.add(5.0, datagram, "a")
    assert hold.pop_due(5.0009) is None
    assert hold.pop_due(5.0010001) == "a"


def test_release_is_by_due_time_with_hops_and_ties_in_arrival_order():
    hold = LinkHold(8e6)  # one byte a microsecond: 100 + 42 bytes held 142 µs a hop
    hold.add(0.0, 100, "two hops", hops=2)  # due 284 µs
    hold.add(0.0, 100, "one hop")  # due 142 µs
    hold.add(0.0, 100, "same time")  # due 142 µs, after "one hop"
    hold.add(0.0, 100, "local", hops=0)  # due at once
    assert hold.next_due_s() == 0.0
    assert [hold.pop_due(1.0) for _ in range(4)] == ["local", "one hop", "same time", "two hops"]
    assert hold.pop_due(1.0) is None and len(hold) == 0


def test_no_rate_means_no_hold():
    hold = LinkHold(None)
    assert not hold.active
    hold.add(3.0, 1466, "x")
    assert hold.pop_due(3.0) == "x"


@pytest.mark.parametrize("sharing", ["reserved", "shared"])
def test_held_node_and_workers_still_sum_exactly_and_take_at_least_two_frame_times(tmp_path, sharing):
    """With a link rate whose full frame takes 20 ms, one chunk's round trip holds it at the node
    and at the worker: at least 40 ms, and the sums stay exact (shared slots: collisions go to the
    end host, which holds too)."""
    rate_bps = FRAME_BYTES * 8 / 20e-3
    rng = np.random.default_rng(11)
    data = [[rng.integers(-1000, 1000, 360).astype(np.int32)] for _ in range(2)]
    with loopback_node(tmp_path, sharing=sharing, link_rate_bps=rate_bps):
        began = time.monotonic()
        results = run_jobs({1: data}, rto_s=1.0, link_rate_bps=rate_bps)
        took = time.monotonic() - began
    exact = np.sum([d[0] for d in data], axis=0)
    assert all(np.array_equal(results[1][w][0], exact) for w in range(2))
    assert took >= 2 * 20e-3


def test_two_jobs_colliding_on_held_links_get_their_own_exact_sums(tmp_path):
    """Collisions go to each job's end host, whose aggregator holds what the node sent it and whose
    results to the other workers are held twice (through the node): every sum still exact."""
    rng = np.random.default_rng(12)
    jobs = {1: [[rng.integers(-100, 100, 30000).astype(np.int32)] for _ in range(3)],
            2: [[rng.integers(10**5, 10**6, 30000).astype(np.int32)] for _ in range(3)]}
    rate_bps = FRAME_BYTES * 8 / 1e-3
    with loopback_node(tmp_path, pool_slots=24, sharing="shared", link_rate_bps=rate_bps) as report:
        results = run_jobs(jobs, window=8, link_rate_bps=rate_bps)
    for job, workers in jobs.items():
        exact = np.sum([w[0] for w in workers], axis=0)
        assert all(np.array_equal(results[job][w][0], exact) for w in range(3))
    assert report["counters"].get("collisions", 0) > 0


def test_a_receiver_blocks_until_the_next_packet_is_due_and_no_longer_than_asked():
    hold = LinkHold(8e6)  # 100 + 42 bytes held 142 µs
    assert hold.wait_s(0.0, 0.5) == 0.5  # nothing held
    hold.add(0.0, 100, "x")
    assert hold.wait_s(1e-4, 0.5) == pytest.approx(42e-6)
    assert hold.wait_s(1e-4, 1e-5) == 1e-5
    assert hold.wait_s(1.0, 0.5) == 0.0  # overdue: at once

"""Collectives whose steps change pattern are simulated step by step as the agents run them: hand
values on a ring whose pairs differ in rate, and the closed forms where every pair is equal."""

from __future__ import annotations

import math

import pytest

from testbed.model.schedule import Schedule
from testbed.oracle.schedule_sim import simulate_schedule as simulate
from testbed.oracle.stepwise import StepwiseCollective
from testbed.planning.scenario_file import make_fabric
from testbed.shared.collective_plans import collective_traffic


def simulate_schedule(schedule: dict, fabric):
    """The tests write their schedules as schedule.json: the oracle reads them typed."""
    return simulate(Schedule.from_json(schedule), fabric)


def one_collective(op: str, algorithm: str, n: int, size: int) -> dict:
    step = {"id": "c", "kind": "collective", "deps": [], "op": op, "algorithm": algorithm,
            "group": list(range(n)), "bytes": size}
    return {"format": "testbed-schedule/1", "name": "c", "hosts": n, "iterations": 1,
            "gpus": [{"rank": r, "steps": [dict(step)]} for r in range(n)],
            "traffic_matrix_bytes": [list(row) for row in collective_traffic(op, algorithm, n, size)]}


def test_pairwise_alltoall_on_a_ring_with_relays_takes_its_steps_one_after_another():
    """4 GPUs, W = 2 wavelengths of 10 Gb/s, reach 1: each GPU has one wavelength to each neighbour
    and pairs two apart relay through the GPU between (the planner routes them all clockwise). A
    pairwise all-to-all of 4 MB moves blocks of b = 1 MB in 3 steps: to the right neighbour
    (b/R), two apart (two relayed flows on each clockwise lightpath: 2b/R), to the left (b/R), each
    after α. All its traffic at once would put three flows on each clockwise lightpath: 3b/R."""
    fabric = make_fabric(kind="sip-ring", hosts=4, gpu_bandwidth_gbps=20, latency_us=5, wavelengths=2,
                         wavelength_gbps=10, neighbors=1, reconfig_us=25, estimate_period_us=1e9)
    b_over_r = 1e6 * 8 / 10e9
    expected = 3 * 5e-6 + (1 + 2 + 1) * b_over_r
    assert simulate_schedule(one_collective("alltoall", "ring", 4, 4_000_000), fabric).iteration_time_s == \
        pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
@pytest.mark.parametrize("n", [2, 5, 8, 16])
def test_binomial_trees_on_a_flat_fabric_are_their_closed_form(op, n):
    """ceil(log2 n) rounds, each a whole buffer over one link: ceil(log2 n)·(α + M/B)."""
    fabric = make_fabric(kind="elect-flat", hosts=n, gpu_bandwidth_gbps=100, latency_us=5)
    size = 8_000_000
    expected = math.ceil(math.log2(n)) * (5e-6 + size * 8 / 100e9)
    assert simulate_schedule(one_collective(op, "tree", n, size), fabric).iteration_time_s == \
        pytest.approx(expected, rel=1e-3)


def test_a_message_moves_only_once_both_ends_reach_its_exchange():
    """Pairwise all-to-all among 4: step t sends to pos + t. Only step 1's messages move at first;
    a rank moves on when both its messages of the step are delivered."""
    collective = StepwiseCollective.of("alltoall", "ring", 4, 4096.0)
    first = collective.start()
    assert sorted((s, d) for s, d, _ in first) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert all(size == pytest.approx(1024.0) for _, _, size in first)
    assert collective.delivered(0, 1) == []  # 0 still receives from 3, 1 still sends to 2
    assert collective.delivered(3, 0) == [0]  # 0's exchange is done
    assert collective.advance(0) == []  # 0 sends to 2, which is still in step 1
    assert sorted(collective.delivered(1, 2)) == [1]
    assert collective.delivered(2, 3) == [2, 3]
    # 0 and 2 exchange in step 2: both messages move once both have reached it
    assert sorted((s, d) for s, d, _ in collective.advance(2)) == [(0, 2), (2, 0)]

"""The retune rule the controller and the oracle share: what a measured estimate keeps, and when a
re-plan is worth its dark time (hand values)."""

from __future__ import annotations

from testbed.network.link_planner import payload_demand, worth_retuning

UNIT_BPS = 10e9  # one link: 1 MB in 800 µs


def test_pairs_that_only_acknowledge_are_not_planned():
    """TCP's acknowledgements are 2-5% of the bytes they acknowledge; real reverse traffic stays."""
    measured = {(0, 1): 1e6, (1, 0): 3e4, (2, 3): 1e6, (3, 2): 4e5, (4, 5): 10.0}
    assert payload_demand(measured) == {(0, 1): 1e6, (2, 3): 1e6, (3, 2): 4e5, (4, 5): 10.0}


def test_a_stray_relayed_pair_is_not_worth_a_retune():
    """1 MB on (0, 1), held and fresh alike at one link (800 µs), and 100 B on (2, 3), which the
    plan in force relays: at half a link 0.16 µs, far less than the 25 µs a retune costs."""
    demand = {(0, 1): 1e6, (2, 3): 100.0}
    assert not worth_retuning(demand, {(0, 1): 1}, {(0, 1): 1, (2, 3): 1}, UNIT_BPS, 25e-6)


def test_a_retune_is_made_when_it_gains_more_than_the_threshold():
    """1 MB on (0, 1): one link 800 µs, two links 400 µs; a gain of 400 µs pays 25 µs, not 500 µs."""
    demand = {(0, 1): 1e6}
    assert worth_retuning(demand, {(0, 1): 1}, {(0, 1): 2}, UNIT_BPS, 25e-6)
    assert not worth_retuning(demand, {(0, 1): 1}, {(0, 1): 2}, UNIT_BPS, 500e-6)


def test_a_relayed_heavy_pair_is_worth_its_own_link():
    """4 MB relayed at half a link takes 6.4 ms; on its own link 3.2 ms: worth 1 ms of dark time."""
    demand = {(0, 2): 4e6}
    assert worth_retuning(demand, {(0, 1): 1, (1, 2): 1}, {(0, 2): 1}, UNIT_BPS, 1e-3)

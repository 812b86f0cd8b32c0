"""`doctor --calibrate`'s probes on the real datapath: each measures something, and they agree."""

from __future__ import annotations

import pytest

from testbed.emulation.platform import datapath

pytestmark = pytest.mark.root


def test_calibration_measures_the_datapath_the_agents_timers_and_the_ina_node(machine_state):
    from testbed.emulation.calibrate import calibrate

    measured = calibrate()
    assert measured.measured and measured.datapath == datapath()
    # iperf3 and the agents' transport stream through the same pairs of the same datapath: the
    # Python transport may be slower, but not by more than an order of magnitude on a machine that
    # runs the suite, and never much faster than what the datapath forwarded.
    assert measured.capacity_bps > 50e6
    assert measured.agent_capacity_bps is not None
    assert 0.1 * measured.capacity_bps < measured.agent_capacity_bps < 1.5 * measured.capacity_bps
    assert measured.usable_capacity_bps == min(measured.capacity_bps, measured.agent_capacity_bps)
    assert 0 < measured.timer_error_s < 5e-3
    assert measured.ina_node_packets_per_s is not None and measured.ina_node_packets_per_s > 1_000

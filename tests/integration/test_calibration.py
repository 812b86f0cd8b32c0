"""`doctor --calibrate`'s probes on the real datapath: each measures something, and they agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from testbed.emulation.platform import datapath

pytestmark = pytest.mark.root


def test_calibration_measures_the_datapath_the_agents_timers_and_the_ina_node(machine_state, tmp_path):
    """Through `doctor --calibrate --json`, whose standard output is the JSON alone, into a state
    directory of the test's own (the last calibration copied in: it says how slow this machine is)."""
    from testbed.core.calibration import Calibration, load_calibration, store_calibration

    store_calibration(load_calibration(), tmp_path / "calibration.json")
    doctor = subprocess.run([sys.executable, "-m", "testbed", "doctor", "--calibrate", "--json"], capture_output=True,
                            text=True, timeout=900, env={**os.environ, "TESTBED_STATE_DIR": str(tmp_path)})
    assert doctor.returncode == 0, doctor.stderr
    measured = Calibration(**json.loads(doctor.stdout)["calibration"])
    assert measured == load_calibration(tmp_path / "calibration.json")
    assert measured.measured and measured.datapath == datapath()
    # iperf3 and the agents' ring all-reduce go through the same datapath: the Python agents may be
    # slower, but not by more than an order of magnitude on a machine that runs the suite, and never
    # much faster than what the datapath forwarded: iperf3 times one pair's stream while the ring
    # keeps every host busy, so on a loaded machine the ring has come out half again faster; twice
    # as fast would mean one of the probes is wrong. A ring step of a tiny message is a few thread
    # hand-offs and wake-ups: above 10 µs, and below the 50 ms that would make every run crawl.
    assert measured.capacity_bps > 50e6
    assert measured.agent_capacity_bps is not None
    assert 0.1 * measured.capacity_bps < measured.agent_capacity_bps < 2 * measured.capacity_bps
    assert measured.usable_capacity_bps == min(measured.capacity_bps, measured.agent_capacity_bps)
    assert measured.agent_step_s is not None and 10e-6 < measured.agent_step_s < 50e-3
    assert 0 < measured.timer_error_s < 5e-3
    # The node answers hundreds of packets a second under software emulation, tens of thousands here.
    assert measured.ina_node_packets_per_s is not None and measured.ina_node_packets_per_s > 100
    # The hypervisor's share while it measured: a fraction, and named by doctor where it was high.
    assert measured.steal_frac is not None and 0 <= measured.steal_frac < 1

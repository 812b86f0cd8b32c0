"""Elect-Fattree over Mininet: leaf and spine switches in Open vSwitch, per-pair ECMP rules from the
os-ken app, shaped uplinks. 8 GPUs on 2 leaves of 4 here (the benchmark measures 16): each ring
step sends one flow out of each leaf, so with oversubscription 4 (a leaf's uplink to one spine
carries half a GPU's bandwidth) the iteration takes twice as long as non-blocking."""

from __future__ import annotations

import pytest

from testbed.emulation.run import Runner
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario

from ..conftest import ROOT
from .conftest import assert_faithful, assert_iterations_match_the_oracle, undisturbed_times_s

pytestmark = pytest.mark.root


def test_oversubscribed_uplinks_slow_the_ring_as_the_oracle_says(tmp_path, machine_state):
    results = {}
    for oversubscription in (1.0, 4.0):
        scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "fattree-allreduce.yaml"),
                                   {"fabric.hosts": 8, "fabric.oversubscription": oversubscription,
                                    "workload.bytes": 50_000_000, "workload.iterations": 2})
        result = Runner(prepare(scenario), tmp_path / f"x{oversubscription:g}").execute()
        assert result["status"] == "ok", result["error"]
        assert result["sums_correct"]
        assert_faithful(result)
        assert_iterations_match_the_oracle(result)
        results[oversubscription] = result
    # The prediction doubles (hand-computed: each step's crossing flow gets B/2 instead of B), and
    # so does the emulated iteration, within the ratio band of each run.
    slow, fast = results[4.0], results[1.0]
    assert slow["predicted_iteration_time_s"] / fast["predicted_iteration_time_s"] == pytest.approx(2.0, rel=0.01)
    if undisturbed_times_s(slow) and undisturbed_times_s(fast):  # else the hypervisor took the cores away
        assert 1.7 <= min(undisturbed_times_s(slow)) / min(undisturbed_times_s(fast)) <= 2.3

"""BytePS and the classic parameter server over Mininet: CPU machines as hosts, exact sums, and
the iteration time within tolerance of the oracle."""

from __future__ import annotations

import pytest

from testbed.run import Runner, prepare
from testbed.scenario import apply_overrides, load_scenario

from ..conftest import ROOT

pytestmark = pytest.mark.root


@pytest.mark.parametrize("overrides", [{}, {"workload.algorithm": "ps"}])
def test_byteps_and_classic_ps_on_cpu_machines(tmp_path, machine_state, overrides):
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "byteps.yaml"),
                               {"workload.iterations": 2, **overrides})
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"] and len(result["iteration_times_s"]) == 2
    for ratio in result["emulated_over_predicted"]:
        assert 0.85 <= ratio <= 1.15


def test_byteps_on_elect_cluster_with_intra_server_steps(tmp_path, machine_state):
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "cluster-byteps.yaml"), {"workload.iterations": 2})
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert result["breakdown"]["compute_s"] > 0  # the intra-server steps, timed as local work
    for ratio in result["emulated_over_predicted"]:
        assert 0.85 <= ratio <= 1.15

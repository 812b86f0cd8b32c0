"""The example Chakra trace (tensor, pipeline and data parallelism on 8 ranks) replayed over
Mininet as a DAG, on Elect-Flat and on SiP-Ring: exact sums, iterations within RATIO_BAND of the
DAG oracle, the run faithful, skipped nodes counted in results.json."""

from __future__ import annotations

import json

import pytest

from testbed.emulation.run import Runner, prepare
from testbed.fabrics.scenario_file import apply_overrides, load_scenario

from ..conftest import ROOT
from .conftest import assert_faithful, assert_iterations_match_the_oracle

pytestmark = pytest.mark.root


@pytest.mark.parametrize("name", ["chakra-flat", "chakra-sip-ring"])
def test_example_chakra_trace_replays_as_a_dag(tmp_path, machine_state, name):
    # Two measured iterations (the scenarios have three): SiP-Ring's dark time holds the dilation at
    # 400, so each costs seconds of wall time.
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / f"{name}.yaml"), {"workload.iterations": 2})
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert_iterations_match_the_oracle(result)
    assert_faithful(result)
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert saved["skipped_trace_nodes"] == {"METADATA_NODE": 8}

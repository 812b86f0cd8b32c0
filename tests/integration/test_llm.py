"""A large model's iteration (tensor, pipeline and data parallelism in 1F1B) replayed with real
packets: scenarios/llm-dense.yaml with 4 micro-batches a replica instead of 8 and two measured
iterations; exact sums, the iterations within RATIO_BAND of the oracle, the run faithful but for
packets the machine lost, the pipeline bubble in the prediction. bench/llm_dense.py runs the whole
scenario on every fabric."""

from __future__ import annotations

import pytest

from testbed.emulation.run import Runner
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario

from ..conftest import ROOT
from .conftest import assert_faithful_but_for_machine_loss, assert_iterations_match_the_oracle

pytestmark = pytest.mark.root


def test_a_large_model_split_three_ways_runs_as_predicted(tmp_path, machine_state):
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "llm-dense.yaml"),
                               {"workload.parallel.global_batch": 8, "workload.iterations": 2})
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert_iterations_match_the_oracle(result)
    # Its tensor-, pipeline- and data-parallel flows into one port at once: the switch datapath drops
    # 0.03-0.14% of their packets in some runs here (bench/results/history.md); those iterations are
    # the machine's, the rest must be faithful.
    assert_faithful_but_for_machine_loss(result)
    assert result["predicted_breakdown"]["bubble_s"] > 0


def test_a_large_models_gradients_summed_by_the_aggregation_node_run_as_predicted(tmp_path, machine_state):
    """scenarios/llm-ina.yaml at 2 layers and 2 micro-batches: each data-parallel group's gradient
    buckets go through the node's program (its counters show the packets) and sum exactly."""
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "llm-ina.yaml"),
                               {"workload.model.layers": 2, "workload.parallel.global_batch": 8,
                                "workload.iterations": 1})
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert_iterations_match_the_oracle(result)
    assert_faithful_but_for_machine_loss(result)
    node = result["ina"]["node"]
    assert len(node["jobs"]) == 2 and node["counters"]["aggregated"] > 0


def test_experts_all_to_all_runs_as_predicted_with_skewed_routing(tmp_path, machine_state):
    """scenarios/llm-moe.yaml on Elect-Flat at 2 micro-batches a replica with a Zipf routing skew:
    every MoE layer's dispatch and combine are uneven sends between the expert-parallel GPUs
    (bench/llm_moe.py runs it as shipped, on a re-planning SiP-Ring)."""
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "llm-moe.yaml"),
                               {"fabric.kind": "elect-flat", "workload.parallel.global_batch": 8,
                                "workload.iterations": 1, "workload.model.routing_skew": 1.0})
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert_iterations_match_the_oracle(result)
    assert_faithful_but_for_machine_loss(result)
    assert result["predicted_breakdown"]["waiting_ep_s"] > 0

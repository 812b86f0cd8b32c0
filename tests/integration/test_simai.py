"""A SimAI/AICB workload file replayed with real packets: AICB's GPT-3 layout cut to two layers on
4 GPUs (tensor-parallel pairs, a data-parallel reduction beside the backward pass), in AICB's own
format; exact sums, the iteration within RATIO_BAND of the oracle, the run faithful."""

from __future__ import annotations

import pytest

from testbed.emulation.run import Runner
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import parse_scenario

from .conftest import assert_faithful, assert_iterations_match_the_oracle

pytestmark = pytest.mark.root

# Columns as AICB writes them: name, dependency, then compute (ns), collective and bytes for the
# forward pass, the input gradient and the weight gradient, then the update time.
WORKLOAD = """HYBRID_TRANSFORMER_FWD_IN_BCKWD\tmodel_parallel_NPU_group: 2 checkpoints: 0 checkpoint_initiates: 0
4
grad_param\t-1\t1\tNONE\t0\t200000\tNONE\t0\t1\tREDUCESCATTER\t8000000\t100
embedding_layer\t-1\t50000\tALLREDUCE\t2000000\t1\tNONE\t0\t1\tNONE\t0\t100
attention_norm\t-1\t300000\tALLREDUCE\t2000000\t400000\tALLREDUCE\t2000000\t400000\tNONE\t0\t100
mlp_norm\t-1\t300000\tALLREDUCE\t2000000\t400000\tALLREDUCE\t2000000\t400000\tNONE\t0\t100
"""


def test_an_aicb_file_replays_as_simai_reads_it(tmp_path, machine_state):
    path = tmp_path / "gpt-cut.txt"
    path.write_text(WORKLOAD)
    scenario = parse_scenario({"name": "aicb", "fabric": {"kind": "elect-flat", "hosts": 4, "gpu_bandwidth_gbps": 100,
                                                          "latency_us": 2},
                               "workload": {"kind": "simai", "path": str(path), "iterations": 2}}, "test")
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert_iterations_match_the_oracle(result)
    assert_faithful(result)

"""AICB's own workload files (tests/data/aicb, unchanged), read with SimAI's semantics: the micro
benchmark predicted as the sum of its collectives by hand, the GPT-3 175B file's tensor-parallel
messages the size our own GPT-3 175B gives, and what the reader refuses."""

from __future__ import annotations

import pytest

from testbed.model.errors import InputError
from testbed.planning.plan import plan
from testbed.planning.scenario_file import parse_scenario
from testbed.workloads.simai.load import read_simai

from ..conftest import ROOT

AICB = ROOT / "tests" / "data" / "aicb"
GPT3 = AICB / "G175B-M1-C03_GPT175B_megatron_tp8_pp1_mbs1_A100.txt"


def scenario(path, hosts=16, rate_gbps=400.0, latency_us=2.0):
    fabric = {"kind": "elect-flat", "hosts": hosts, "gpu_bandwidth_gbps": rate_gbps, "latency_us": latency_us}
    return parse_scenario({"name": "aicb", "fabric": fabric,
                           "workload": {"kind": "simai", "path": str(path), "iterations": 1}}, "test")


def test_the_micro_benchmark_is_the_sum_of_its_all_reduces():
    """19 ring all-reduces of 4 KiB · 2^k over 16 GPUs, one after another: each
    2(n-1)·α + 2(n-1)/n·M/B (the source documents' formula)."""
    n, rate_bps, alpha_s = 16, 400e9, 2e-6
    by_hand = sum(2 * (n - 1) * alpha_s + 2 * (n - 1) / n * (4096 * 2 ** k) * 8 / rate_bps for k in range(19))
    found = plan(scenario(AICB / "all_reduce.txt"))
    assert found.prediction.iteration_time_s == pytest.approx(by_hand, rel=1e-6)
    assert found.traffic_bytes.by_primitive["all-reduce"] == sum(2 * (n - 1) * 4096 * 2 ** k for k in range(19))


def test_the_gpt3_file_has_the_tensor_parallel_messages_our_gpt3_makes():
    """AICB's GPT-3 175B (tp 8, micro-batch 1) all-reduces 50,331,648 bytes after each attention and
    MLP block; our llm kind's gpt3-175b with tp 8 moves the same (b·s·h·2 bytes in bf16)."""
    read = read_simai(GPT3)
    assert read.policy == "HYBRID_TRANSFORMER_FWD_IN_BCKWD" and read.tp == 8
    blocks = {layer.forward.bytes for layer in read.layers if layer.name in ("attention_norm", "mlp_norm")}
    ours = parse_scenario({"name": "gpt3", "fabric": {"kind": "elect-flat", "hosts": 8, "gpu_bandwidth_gbps": 400},
                           "workload": {"kind": "llm", "model": {"preset": "gpt3-175b", "layers": 8},
                                        "parallel": {"tp": 8, "global_batch": 1}, "recompute": "full",
                                        "device": "a100"}}, "test")
    from testbed.workloads.llm.schedule import llm_schedule
    schedule = llm_schedule(ours.workload, 8, "gpt3")
    sizes = {s.bytes for s in schedule.gpus[0].steps if s.kind == "collective" and ".attn." in s.id}
    assert blocks == sizes == {50_331_648}


def test_the_gpt3_file_predicts_with_its_groups():
    found = plan(scenario(GPT3))
    groups = {s.group for s in found.schedule.gpus[9].steps if s.kind == "collective"}
    assert groups == {tuple(range(8, 16)), (1, 9)}  # its tp group, and its dp group of the ranks 8 apart
    assert found.prediction.iteration_time_s > 0


@pytest.mark.parametrize(("text", "says"), [
    ("HYBRID_DLRM\n1\n", "not one this reader runs"),
    ("MICRO\n2\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 4096 1\n", "2 layers, but the file has 1"),
    ("MICRO\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 4096\n", "11 fields where a layer has 12"),
    ("MICRO\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE -5 1\n", "outside 0"),
    ("MICRO\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 1e400 1\n", "not a whole number"),
    ("MICRO\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLTOALL_EP 64 1\n", "expert-parallel"),
    ("HYBRID_TRANSFORMER model_parallel_NPU_group: 8 pp: 4\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n",
     "pp, ep and vpp 1"),
    ("HYBRID_TRANSFORMER model_parallel_NPU_group: 3\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", "does not divide"),
])
def test_what_cannot_be_read_is_refused_in_one_sentence(tmp_path, text, says):
    path = tmp_path / "w.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=says):
        plan(scenario(path))


def test_a_collective_simai_does_not_run_is_counted_not_run(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text("HYBRID_TRANSFORMER model_parallel_NPU_group: 2\n1\n"
                    "norm -1 1000 BROADCAST 16384 1 NONE 0 1 NONE 0 1\n")
    found = plan(scenario(path, hosts=4))
    assert dict(found.schedule.skipped_nodes) == {"BROADCAST (SimAI runs no such collective)": 1}
    assert found.traffic_bytes.total() == 0

"""The paper's setup (SiP-ML §3.2, §4.2): its compute model and its output-channel split, against
values worked out by hand from the layer shapes."""

import pytest

from testbed.placer.balance import balance
from testbed.placer.plan import make_plan
from testbed.placer.profiles import device
from testbed.placer.settings import PlanSettings
from testbed.placer.zoo import _Builder
from testbed.planning.scenario_file import parse_scenario
from testbed.workloads.model.plan import model_plan

WIDTH = 2048  # channels in and out of each linear layer
FLOPS_PER_SAMPLE = 2 * WIDTH * WIDTH
V100_FLOPS = 0.45 * 125e12


def _two_linears():
    builder = _Builder()
    builder.add("fc1", "linear", FLOPS_PER_SAMPLE, WIDTH, WIDTH * WIDTH, max_parts=WIDTH)
    builder.add("fc2", "linear", FLOPS_PER_SAMPLE, WIDTH, WIDTH * WIDTH, ("fc1",), max_parts=WIDTH)
    return builder.build("two-linears")


def test_the_paper_compute_model_divides_a_channel_split_linearly():
    # 32 samples through a 2048-channel linear: a 32 × 2048 output GEMM. 64×64 tiles: 32 tiles in
    # one wave of 80 SMs, 32·2048 / (80·4096) = 0.2 of the large-GEMM rate. Cut by channel into 4
    # (512 each): 8 tiles, 32·512 / (80·4096) = 0.05. "waves" times each part at its own shape,
    # "paper" at the whole op's (the batch it was profiled at), divided by 4.
    total_us = 32 * FLOPS_PER_SAMPLE / V100_FLOPS * 1e6
    waves = balance(_two_linears(), device("v100", "waves"), 32, 4, tau_us=1.0)[0]
    paper = balance(_two_linears(), device("v100", "paper"), 32, 4, tau_us=1.0)[0]
    constant = balance(_two_linears(), device("v100"), 32, 4, tau_us=1.0)[0]
    assert (paper.split, paper.parts) == ("column", 4)
    assert waves.part_us == pytest.approx(total_us / 4 / 0.05 + 1.0)
    assert paper.part_us == pytest.approx(total_us / 4 / 0.2 + 1.0)
    assert constant.part_us == pytest.approx(total_us / 4 + 1.0)


def test_the_paper_compute_model_penalises_a_small_local_batch():
    # One sample: a 1 × 2048 GEMM, 32 tiles of 64×64 in one wave: 2048 / (80·4096) = 1/160.
    one = balance(_two_linears(), device("v100", "paper"), 1, 1)[0]
    assert one.part_us == pytest.approx(FLOPS_PER_SAMPLE / V100_FLOPS * 1e6 * 160 + 1.0)


def test_without_pairing_each_part_gathers_its_whole_input_and_sums_the_input_gradient():
    batch, k = 64, 4
    out_bytes = WIDTH * 2 * batch  # fc1's fp16 output for the local batch
    paired = make_plan(_two_linears(), device("v100"), k, 1, batch, None, tau_us=1.0)
    assert [op.split for op in paired.placement.ops] == ["column", "row", "row", "column"]
    # Megatron's pair: fc2 takes fc1's channel slices where they were made, fc1's backward the
    # slices of the input gradient fc2's backward made: nothing crosses between GPUs.
    assert sum(paired.mp_traffic.values()) == 0
    broadcast = make_plan(_two_linears(), device("v100"), k, 1, batch, None, tau_us=1.0,
                          settings=PlanSettings(pairing=False))
    assert [op.split for op in broadcast.placement.ops] == ["column", "column", "column", "column"]
    # Forward, each of fc2's 4 parts gathers the 3 slices of fc1's output it lacks: 3·out in all;
    # backward, each of fc1's parts takes its slice of the 3 other parts' partial input gradients.
    assert sum(broadcast.mp_traffic.values()) == pytest.approx(2 * 3 * out_bytes)


def test_a_scenario_chooses_the_paper_setup():
    scenario = parse_scenario({
        "name": "paper-setup", "fabric": {"kind": "elect-flat", "hosts": 8, "gpu_bandwidth_gbps": 100},
        "workload": {"kind": "model", "model": {"name": "transformer", "global_batch": 16, "mp": 4, "dp": 2,
                                                "efficiency": "paper", "split_pairing": False}}})
    plan = model_plan(scenario)
    assert plan.device.efficiency == "paper"
    assert "row" not in {op.split for op in plan.placement.ops}



def test_a_measured_curve_over_the_batch_times_each_part(tmp_path):
    from testbed.placer.profiles import load_user_profile

    profile = tmp_path / "curve.yaml"
    profile.write_text(
        "name: measured\n"
        "ops:\n"
        "  - {name: fc, kind: linear, compute_us_by_batch: {1: 40, 8: 60, 64: 310}, output_bytes: 4096,\n"
        "     parameter_bytes: 1000000, max_parts: 2048}\n"
        "  - {name: norm, kind: norm, compute_us_by_batch: {1: 20, 8: 24}, output_bytes: 4096, deps: [fc]}\n")
    graph = load_user_profile(profile)
    by_name = {op.op.name: op for op in balance(graph, device("v100"), 32, 1)}
    # 32 samples: between the points at 8 and 64, 60 + (310 − 60)·24/56 µs, plus 1 µs of launch;
    # its backward twice that (an op with weights).
    assert by_name["fc"].part_us == pytest.approx(60 + 250 * 24 / 56 + 1)
    assert by_name["fc.bwd"].part_us == pytest.approx(2 * (60 + 250 * 24 / 56) + 1)
    # Beyond the last point, its time per sample: 128 samples of norm take 24·128/8 µs.
    assert balance(graph, device("v100"), 128, 1)[1].part_us == pytest.approx(24 * 16 + 1)
    # Cut by sample into 4 at a local batch of 8, a part runs 2 samples: 20 + 4·1/7 µs (the curve),
    # not 24/4; fc cut by channel into 4 divides its 60 µs linearly.
    cut = {op.op.name: op for op in balance(graph, device("v100"), 8, 4, tau_us=1.0)}
    assert (cut["norm"].split, cut["norm"].parts) == ("sample", 4)
    assert cut["norm"].part_us == pytest.approx(20 + 4 / 7 + 1)
    assert (cut["fc"].split, cut["fc"].parts) == ("column", 4)
    assert cut["fc"].part_us == pytest.approx(60 / 4 + 1)


def test_a_curve_with_a_batch_below_one_is_refused_in_one_sentence(tmp_path):
    from testbed.model.errors import InputError
    from testbed.placer.profiles import load_user_profile

    profile = tmp_path / "bad.yaml"
    profile.write_text("name: bad\nops:\n  - {name: fc, compute_us_by_batch: {0: 5}, output_bytes: 8}\n")
    with pytest.raises(InputError, match="compute_us_by_batch needs batch sizes of at least 1"):
        load_user_profile(profile)
    profile.write_text("name: bad\nops:\n  - {name: fc, compute_us_per_sample: 1, compute_us_by_batch: {1: 5},"
                       " output_bytes: 8}\n")
    with pytest.raises(InputError, match="exactly one of"):
        load_user_profile(profile)

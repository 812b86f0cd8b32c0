"""Spatial (height) splits of convolutions: halos, weight-gradient sums, and the choice of dimension.
Expected values are worked out by hand from the layer shapes, not taken from the placer."""

import pytest

from testbed.placer.balance import GRADIENT_SUM, balance, inputs_of
from testbed.placer.emit import plan_schedule
from testbed.placer.plan import make_plan, verify
from testbed.placer.profiles import device
from testbed.placer.settings import PlanSettings
from testbed.placer.zoo import MODELS, _Builder
from testbed.planning.scenario_file import parse_scenario
from testbed.workloads.model.plan import model_plan

V100 = device("v100")
# conv1 of ResNet-50: 7×7×3 -> 64 channels; one row of its 112×112×64 fp16 output is 112·64·2 bytes.
CONV1_WEIGHT_BYTES = 7 * 7 * 3 * 64 * 2
CONV1_ROW_BYTES = 112 * 64 * 2


def _by_name(ops):
    return {op.op.name: op for op in ops}


def test_a_pool_after_a_row_split_conv_needs_its_rows_and_one_halo_row_from_each_neighbour():
    ops = _by_name(balance(MODELS["resnet50"](), V100, 32, 4))
    conv1, pool1 = ops["conv1"], ops["pool1"]
    assert (conv1.split, conv1.parts, pool1.split, pool1.parts) == ("height", 4, "height", 4)
    # pool1's part 1 makes output rows 14..27 of 56, from conv1's rows 28..55 of 112, plus one
    # row either side (a 3×3 window): 1 row of conv1's part 0, its 28 rows of part 1, 1 of part 2.
    assert inputs_of(conv1, pool1, 1) == [(0, pytest.approx(1 * CONV1_ROW_BYTES * 32)),
                                          (1, pytest.approx(28 * CONV1_ROW_BYTES * 32)),
                                          (2, pytest.approx(1 * CONV1_ROW_BYTES * 32))]
    # The first part has no neighbour above it.
    assert inputs_of(conv1, pool1, 0) == [(0, pytest.approx(28 * CONV1_ROW_BYTES * 32)),
                                          (1, pytest.approx(1 * CONV1_ROW_BYTES * 32))]


def test_a_row_split_conv_sums_its_weight_gradient_over_its_parts():
    plan = make_plan(MODELS["resnet50"](), V100, 4, 1, 32, None)
    assert verify(plan) == []
    ops = plan.placement.ops
    wgrad = next(i for i, op in enumerate(ops) if op.op.name == "conv1.wgrad")
    backward = next(i for i, op in enumerate(ops) if op.op.name == "conv1.bwd")
    assert ops[wgrad].op.kind == GRADIENT_SUM and ops[wgrad].parts == 4
    # Each part's piece of every shard (a quarter of the gradient) plus the summed quarter sent
    # back: 2·W/4 from each part of the backward to each other part.
    gpus = plan.placement.gpu
    for (q, p, i, dst), size in plan.messages.items():
        if i == wgrad:
            assert q == backward and gpus[q][p] != dst
            assert size == pytest.approx(2 * CONV1_WEIGHT_BYTES / 4)
    sent = sum(size for (_, _, i, _), size in plan.messages.items() if i == wgrad)
    assert sent == pytest.approx(2 * 3 * CONV1_WEIGHT_BYTES)  # 2(p − 1)·W over 4 parts on 4 GPUs


def test_every_weight_is_all_reduced_once_over_the_mp_group():
    graph = MODELS["resnet50"]()
    plan = make_plan(graph, V100, 4, 2, 64, None)
    assert any(op.split == "height" for op in plan.placement.ops)
    # ResNet-50 has no replicated (sample-split) weights: the DP rings carry each weight once.
    assert sum(plan.grad_bytes) == pytest.approx(graph.param_bytes)
    assert sum(b.bytes for own in plan.buckets for b in own) == pytest.approx(graph.param_bytes)


def _one_conv(weight_elements: float):
    b = _Builder()
    # 8 rows of 8×16 outputs per sample, a 3×3 kernel after a 1×1 one.
    first = b.add("a", "conv", 2e9, 8 * 8 * 16, 16 * 16, (), 16, 8, 0)
    b.add("b", "conv", 2e9, 8 * 8 * 16, weight_elements, (first,), 16, 8, 1)
    return b.build("two-convs")


def test_the_dimension_that_moves_fewer_bytes_is_chosen():
    # Per sample the activations are 2 KB; at batch 4 a channel split of b moves 3·(8 + 8) KB = 48 KB.
    # A row split moves its weight gradient twice over 3 parts (6·W) plus halos: 4·3·1/8 of 8 KB = 12 KB.
    light = _by_name(balance(_one_conv(16 * 16 * 9), V100, 4, 4))  # W = 4.6 KB: 27.6 + 12 < 48 KB
    heavy = _by_name(balance(_one_conv(16 * 16 * 9 * 4), V100, 4, 4))  # W = 18.4 KB: 110.6 + 12 > 48 KB
    assert light["b"].split == "height" and heavy["b"].split == "column"
    # Channel splits only: a by output channel, b by input channel after it (Megatron's pairing).
    assert [op.split for op in balance(_one_conv(16 * 16 * 9), V100, 4, 4, spatial=False)[:2]] == ["column", "row"]


def test_spatial_splits_cut_resnet_traffic_and_emit_a_valid_schedule():
    graph = MODELS["resnet50"]()
    with_rows = make_plan(graph, V100, 8, 2, 128, None)
    channels = make_plan(graph, V100, 8, 2, 128, None, settings=PlanSettings(spatial=False))
    assert not any(op.split == "height" for op in channels.placement.ops)
    # Channel splits move activations: at 8 samples a GPU these are tens of MB an iteration, the
    # weights of the row-split convolutions a few.
    assert sum(with_rows.mp_traffic.values()) < 0.5 * sum(channels.mp_traffic.values())
    schedule = plan_schedule(with_rows, "resnet-rows", 1)
    sent = sum(s.bytes or 0 for g in schedule.gpus for s in g.steps if s.kind == "send")
    received = sum(s.bytes or 0 for g in schedule.gpus for s in g.steps if s.kind == "recv")
    assert sent == received > 0


def test_a_tighter_degree_than_the_full_mesh_keeps_channel_splits():
    plan = make_plan(MODELS["resnet50"](), V100, 8, 2, 128, 3)
    assert not any(op.split == "height" for op in plan.placement.ops)


def test_a_scenario_can_turn_spatial_splits_off():
    base = {"name": "r", "fabric": {"kind": "elect-flat", "hosts": 8, "gpu_bandwidth_gbps": 100},
            "workload": {"kind": "model", "model": {"name": "resnet50", "global_batch": 64, "mp": 4, "dp": 2}}}
    assert any(op.split == "height" for op in model_plan(parse_scenario(base)).placement.ops)
    base["workload"]["model"]["spatial_splits"] = False
    assert not any(op.split == "height" for op in model_plan(parse_scenario(base)).placement.ops)

"""Mixture of experts on the large-model kind: the routing's shares, the all-to-all bytes on the
wire for a hand-worked routing (uniform and skewed), the expert groups, the presets' sizes and
the refusals (docs/large-models.md, "Experts")."""

from __future__ import annotations

import pytest

from testbed.model.errors import InputError
from testbed.planning.plan import plan
from testbed.planning.scenario_file import parse_scenario
from testbed.workloads.llm.moe import expert_groups, routing_shares
from testbed.workloads.llm.presets import PRESETS
from testbed.workloads.llm.shape import Layers

FAST = {"kind": "elect-flat", "gpu_bandwidth_gbps": 1e7, "latency_us": 0}
# 2 layers of a shortened Mixtral: hidden 1024, 8 experts of width 3584, top-2, sequences of 1024
SMALL = {"preset": "mixtral-8x7b", "layers": 2, "hidden": 1024, "ffn_hidden": 3584, "expert_ffn_hidden": 3584,
         "heads": 8, "kv_heads": 2, "vocab": 8192, "seq_len": 1024}


def scenario(model=None, **parallel):
    par = {"tp": 1, "pp": 1, "dp": 1, "global_batch": 4, **parallel}
    hosts = par["tp"] * par["pp"] * par["dp"]
    return parse_scenario({"name": "moe", "fabric": {**FAST, "hosts": hosts},
                           "workload": {"kind": "llm", "model": {**SMALL, **(model or {})}, "parallel": par}},
                          "test")


def test_even_routing_sends_each_gpu_its_share_of_the_tokens():
    """dp 4, ep 4: each GPU holds 2 of the 8 experts and routes 1,024 tokens to 2 experts each,
    so it sends 1,024·2·(2/8) = 512 tokens to each other GPU of the group, 1,024·2 bytes a token;
    4 all-to-alls a layer and micro-batch (dispatch and combine, forward and backward), 2 layers,
    1 micro-batch a replica (global batch 4), 4 GPUs each sending to 3."""
    found = plan(scenario(dp=4, ep=4))
    per_pair = 512 * 1024 * 2
    assert found.traffic_bytes.by_parallelism["ep"] == 4 * 3 * per_pair * 4 * 2
    assert found.traffic_bytes.by_primitive["all-to-all"] == found.traffic_bytes.by_parallelism["ep"]


def test_skewed_routing_water_fills_the_popular_experts():
    """Zipf skew 2 over 8 experts, top-2: weights 1, 1/4, 1/9, ... (Σ = 1.5274); 2·1/1.5274 = 1.309
    would exceed 1, so the most popular expert takes every token (share 1) and the other seven
    share the remaining 1 by their weights: 0.25/0.5274 = 0.474 for the second."""
    arch = PRESETS["mixtral-8x7b"]
    shares = sorted(routing_shares(arch, 2.0, 7, 0), reverse=True)
    rest = sum(1 / r ** 2 for r in range(2, 9))
    assert shares[0] == pytest.approx(1.0)
    assert shares[1] == pytest.approx(0.25 / rest)
    assert sum(shares) == pytest.approx(2.0)
    assert sorted(routing_shares(arch, 0.0, 7, 0)) == [pytest.approx(0.25)] * 8


def test_skewed_all_to_all_bytes_follow_the_routing():
    """Zipf skew 1 over 8 experts, top-2, ep 4 over dp 4: expert e of popularity rank r_e (the
    seeded permutation) gets 2·(1/r_e)/H_8 of the tokens, H_8 = Σ 1/r = 2.7179 (none above 1);
    GPU j holds experts 2j and 2j+1, so every GPU's dispatch sends GPU j round(1,024·(π_2j +
    π_2j+1)) tokens of 2,048 bytes: all-to-all-v, uneven, the hot experts' GPU receiving most."""
    import numpy as np

    from testbed.model.schedule import SendStep
    from testbed.workloads.llm.schedule import llm_schedule
    found = scenario(model={"routing_skew": 1.0, "routing_seed": 3}, dp=4, ep=4)
    rank = np.random.default_rng([3, 0]).permutation(8) + 1  # layer 0
    harmonic = sum(1 / r for r in range(1, 9))
    shares = [2 / r / harmonic for r in rank]
    tokens = [round(1024 * (shares[2 * j] + shares[2 * j + 1])) for j in range(4)]
    assert len(set(tokens)) > 1
    schedule = llm_schedule(found.workload, 4, "x")
    for gpu in schedule.gpus:
        sends = {step.peer: step.bytes for step in gpu.steps
                 if isinstance(step, SendStep) and step.id.startswith("ep.F0.0.dispatch.")}
        assert sends == {j: tokens[j] * 2048 for j in range(4) if j != gpu.rank}
        combine = {step.peer: step.bytes for step in gpu.steps
                   if isinstance(step, SendStep) and step.id.startswith("ep.F0.0.combine.")}
        assert combine == {j: tokens[gpu.rank] * 2048 for j in range(4) if j != gpu.rank}


def test_a_capacity_factor_drops_what_an_expert_cannot_take():
    """Capacity 1.0: an expert takes at most 1,024·2/8 = 256 tokens from a GPU. Dropless, every
    GPU sends all its 2,048 (token, expert) pairs but those for its own experts whatever the skew
    (the same routing from every GPU), so skewed and even move the same bytes; capped, the popular
    experts' overflow stays home."""
    skewed = {"routing_skew": 2.0}
    dropless = plan(scenario(model=skewed, dp=2, ep=2, global_batch=2)).traffic_bytes.by_parallelism["ep"]
    capped = plan(scenario(model={**skewed, "capacity_factor": 1.0}, dp=2, ep=2,
                           global_batch=2)).traffic_bytes.by_parallelism["ep"]
    even = plan(scenario(dp=2, ep=2, global_batch=2)).traffic_bytes.by_parallelism["ep"]
    assert dropless == even and capped < dropless


def test_expert_groups_are_consecutive_ranks_of_a_stage():
    groups = expert_groups([0, 1, 2, 3, 4, 5, 6, 7], 5, 4)
    assert groups.ep_group == (4, 5, 6, 7) and groups.position == 1 and groups.expert_dp_group == (1, 5)


def test_the_experts_gradients_are_reduced_over_their_own_group():
    """dp 4, ep 2: each GPU holds 4 experts, the same 4 as the GPU two ranks away: their
    gradients (2 layers × 4 experts × 3·1024·3584 weights, fp32) all-reduce over that pair."""
    found = plan(scenario(dp=4, ep=2))
    experts = 2 * 4 * 3 * 1024 * 3584 * 4
    h, layers = 1024, 2
    dense = layers * (h * (h + 2 * 2 * 128) + h * h + 2 * h + h * 8) + 2 * 8192 * h
    # dense: a ring of 4 moves 2·3·M in all; experts: 2 pairs each moving 2·1·M_e, for each of 2 groups
    assert found.traffic_bytes.by_parallelism["dp"] == pytest.approx(6 * dense * 4 + 2 * 2 * experts, abs=256)


def test_the_moe_presets_have_their_published_sizes():
    for name, billions in (("mixtral-8x7b", 46.7), ("deepseek-v3", 671)):
        arch = PRESETS[name]
        layers = Layers(arch, 1, 1)
        total = sum(layers.dense_params(i) + layers.routed_params(i) for i in range(arch.layers))
        total += 2 * layers.embedding_params()
        assert total / 1e9 == pytest.approx(billions, rel=0.01), name


@pytest.mark.parametrize(("model", "parallel", "says"), [
    ({}, {"dp": 3, "ep": 3, "global_batch": 3}, "multiple of parallel.ep"),
    ({}, {"tp": 2, "global_batch": 1}, "needs sequence_parallel"),
    ({"experts": 0}, {"dp": 2, "ep": 2, "global_batch": 2}, "top_k, shared_experts"),
    ({"top_k": 9}, {"global_batch": 1}, "top_k .9. must be 1 to experts"),
    ({"first_dense_layers": 2}, {"global_batch": 1}, "no layer has experts"),
    ({}, {"dp": 2, "ep": 4, "global_batch": 2}, "must divide tp × dp"),
    ({}, {"dp": 2, "ep": 2, "global_batch": 2, "order": "ep-tp-dp-pp"}, "ep comes just before dp"),
])
def test_what_cannot_be_split_among_experts_is_refused(model, parallel, says):
    with pytest.raises(InputError, match=says):
        scenario(model=model, **parallel)


@pytest.mark.parametrize(("model", "parallel"), [
    ({}, {"pp": 2, "dp": 4, "ep": 4, "global_batch": 8}),
    ({"routing_skew": 1.2, "capacity_factor": 1.25}, {"pp": 2, "dp": 4, "ep": 2, "global_batch": 8}),
    ({"shared_experts": 1, "expert_ffn_hidden": 512, "experts": 16, "top_k": 4, "first_dense_layers": 1,
      "layers": 4}, {"tp": 2, "dp": 4, "ep": 8, "sequence_parallel": True, "global_batch": 8}),
    ({"moe_layer_freq": 2, "layers": 4}, {"pp": 2, "dp": 4, "ep": 4, "zero": 1, "global_batch": 8}),
])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_the_formulas_count_the_expert_bytes_the_schedule_moves(model, parallel, recompute):
    """The closed form's traffic (for clusters too large to schedule) against the schedule's count."""
    from testbed.workloads.llm.estimate import traffic_formula
    from testbed.workloads.llm.schedule import llm_schedule
    from testbed.workloads.traffic import traffic_bytes
    found = scenario(model=model, **parallel)
    workload = found.workload.model_copy(update={"recompute": recompute})
    counted = traffic_bytes(llm_schedule(workload, found.fabric.hosts, "x"))
    formula = traffic_formula(workload)
    for name in ("tp", "pp", "dp", "ep"):
        assert formula.by_parallelism[name] == pytest.approx(counted.by_parallelism[name], abs=1024), name
    for name, value in counted.by_primitive.items():
        assert formula.by_primitive[name] == pytest.approx(value, abs=1024), name


def test_naming_ep_in_the_order_just_before_dp_changes_nothing():
    plain = plan(scenario(pp=2, dp=4, ep=4, global_batch=8))
    named = plan(scenario(pp=2, dp=4, ep=4, global_batch=8, order="tp-ep-dp-pp"))
    assert named.prediction.iteration_time_s == plain.prediction.iteration_time_s

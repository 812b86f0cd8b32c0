"""The large-model workload kind: its pipeline orders, the bubble they leave, the bytes each
parallelism puts on the wire (against the hand formulas of docs/large-models.md), memory, presets
and refusals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.model.errors import InputError
from testbed.model.schedule import ComputeStep, GpuSchedule, RecvStep, Schedule, SendStep
from testbed.oracle.schedule_sim import simulate_schedule
from testbed.planning.plan import plan
from testbed.planning.scenario_file import parse_scenario
from testbed.workloads.llm.pipeline import Pass, stage_passes
from testbed.workloads.llm.presets import PRESETS

FAST = {"kind": "elect-flat", "gpu_bandwidth_gbps": 1e7, "latency_us": 0}


def scenario(fabric=None, **workload):
    parallel = workload.pop("parallel")
    model = workload.pop("model", {"preset": "llama3-8b", "layers": 4, "seq_len": 1024})
    par = {"tp": 1, "pp": 1, "dp": 1, **parallel}
    hosts = par["tp"] * par["pp"] * par["dp"]
    return parse_scenario({"name": "llm", "fabric": {**(fabric or FAST), "hosts": hosts},
                           "workload": {"kind": "llm", "model": model, "parallel": par, **workload}}, "test")


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("pp", "m"), [(2, 1), (2, 4), (4, 8), (4, 3), (8, 8)])
def test_every_stage_runs_every_pass_once_in_an_order_the_pipeline_allows(schedule, pp, m):
    for stage in range(pp):
        passes = stage_passes(schedule, pp, stage, m)
        assert sorted(passes, key=lambda p: (p.phase, p.micro)) == \
            [Pass("B", i) for i in range(m)] + [Pass("F", i) for i in range(m)]
        # a micro-batch's backward comes after its forward on the same stage
        assert all(passes.index(Pass("F", i)) < passes.index(Pass("B", i)) for i in range(m))
    if schedule == "1f1b":  # stage s holds at most pp - s forwards whose backward has not run
        for stage in range(pp):
            live = peak = 0
            for p in stage_passes(schedule, pp, stage, m):
                live += 1 if p.phase == "F" else -1
                peak = max(peak, live)
            assert peak == min(pp - stage, m)


def synthetic_pipeline(schedule: str, pp: int, m: int, chunks: int, forward_us: float) -> Schedule:
    """Equal stages, no communication to speak of: each pass of a chunk takes forward_us (backward
    twice that), messages of one byte between consecutive chunks."""
    gpus = []
    for stage in range(pp):
        steps = []
        for p in stage_passes(schedule, pp, stage, m, chunks):
            index = p.chunk * pp + stage
            if p.phase == "F":
                if index > 0:
                    steps.append(RecvStep(f"r{p}", (index - 1) % pp, 1, f"a{p.micro}.{index - 1}"))
                steps.append(ComputeStep(f"c{p}", forward_us))
                if index < pp * chunks - 1:
                    steps.append(SendStep(f"s{p}", (index + 1) % pp, 1, f"a{p.micro}.{index}"))
            else:
                if index < pp * chunks - 1:
                    steps.append(RecvStep(f"r{p}", (index + 1) % pp, 1, f"g{p.micro}.{index + 1}"))
                steps.append(ComputeStep(f"c{p}", 2 * forward_us))
                if index > 0:
                    steps.append(SendStep(f"s{p}", (index - 1) % pp, 1, f"g{p.micro}.{index}"))
        gpus.append(GpuSchedule(stage, tuple(steps)))
    return Schedule("pipeline", pp, 1, tuple(gpus))


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 4), (4, 16), (8, 3)])
def test_the_bubble_is_pp_minus_one_over_m_plus_pp_minus_one_of_the_iteration(schedule, pp, m):
    """(pp-1)/(m+pp-1) (Huang et al., GPipe; Narayanan et al., SC'21, §2.2.1) with equal stages."""
    from testbed.planning.scenario_file import make_fabric
    fabric = make_fabric(**FAST, hosts=pp)
    forward_us = 1000.0
    found = simulate_schedule(synthetic_pipeline(schedule, pp, m, 1, forward_us), fabric)
    iteration_us = (m + pp - 1) * 3 * forward_us
    assert found.iteration_time_s * 1e6 == pytest.approx(iteration_us, rel=1e-6)
    assert found.breakdown.bubble_s / found.iteration_time_s == pytest.approx((pp - 1) / (m + pp - 1), rel=1e-6)


@pytest.mark.parametrize(("pp", "m", "v"), [(2, 4, 2), (4, 8, 2), (4, 8, 4)])
def test_interleaving_divides_the_bubble_by_the_chunks(pp, m, v):
    """Megatron-LM's interleaved 1F1B: a bubble of (pp-1)/v passes of a whole stage, so
    (pp-1)/(v·m + pp-1) of the iteration (Narayanan et al., SC'21, §2.2.2)."""
    from testbed.planning.scenario_file import make_fabric
    fabric = make_fabric(**FAST, hosts=pp)
    chunk_us = 1000.0
    found = simulate_schedule(synthetic_pipeline("interleaved", pp, m, v, chunk_us), fabric)
    assert found.iteration_time_s * 1e6 == pytest.approx((v * m + pp - 1) * 3 * chunk_us, rel=1e-6)
    assert found.breakdown.bubble_s / found.iteration_time_s == pytest.approx((pp - 1) / (v * m + pp - 1), rel=1e-6)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_a_generated_model_leaves_the_same_bubble(schedule):
    """The llm kind's own schedule: a vocabulary of 128 makes the output layer 1% of a stage."""
    pp, m = 4, 8
    found = plan(scenario(model={"layers": 8, "hidden": 1024, "ffn_hidden": 4096, "heads": 16, "vocab": 128,
                                 "seq_len": 1024},
                          parallel={"pp": pp, "global_batch": m, "schedule": schedule}))
    share = found.prediction.breakdown.bubble_s / found.prediction.iteration_time_s
    assert share == pytest.approx((pp - 1) / (m + pp - 1), rel=0.02)


def test_traffic_bytes_match_the_hand_formulas():
    """llama3-8b shortened to 4 layers at sequence 1024, tp 2 × pp 2 × dp 2, 4 micro-batches of 1, bf16:
    A = b·s·h·2 bytes = 8 MiB. Per micro-batch and layer, 2 all-reduces forward and 2 backward on each
    of the 4 tp groups' ... counted once per group: a ring all-reduce of M over t puts 2(t-1)·M on the wire."""
    found = plan(scenario(parallel={"tp": 2, "pp": 2, "dp": 2, "global_batch": 8}))
    h, s, layers, m, t, dp, pp = 4096, 1024, 4, 4, 2, 2, 2
    activation = s * h * 2
    ring = 2 * (t - 1) * activation  # one all-reduce over a tp pair
    per_layer = 4 * ring  # two forward, two backward
    # every layer on its stage, every micro-batch, every tp group of that stage; the embedding's forward
    # all-reduce on stage 0 and the output layer's backward all-reduce on stage 1, per micro-batch
    tp = layers * m * dp * per_layer + 2 * m * dp * ring
    assert found.traffic_bytes.by_parallelism["tp"] == tp
    # each stage boundary: activations forward and gradients back, per micro-batch, from each tp rank
    assert found.traffic_bytes.by_parallelism["pp"] == 2 * m * (pp - 1) * t * dp * activation
    attention = h * (h + 2 * 8 * 128) + h * h
    layer = attention + 3 * h * 14336 + 2 * h
    embedding = 128256 * h
    grads = {0: (2 * layer + embedding) // t, 1: (2 * layer + embedding) // t}  # per rank, fp32
    dp_wire = sum(2 * (dp - 1) * grads[p] * 4 for p in range(pp)) * t  # one ring per (stage, tp rank)
    assert found.traffic_bytes.by_parallelism["dp"] == pytest.approx(dp_wire, abs=64)
    assert found.traffic_bytes.by_primitive["send-recv"] == found.traffic_bytes.by_parallelism["pp"]


def test_sequence_parallelism_moves_the_same_tensor_parallel_bytes_as_reduce_scatter_and_all_gather():
    plain = plan(scenario(parallel={"tp": 4, "global_batch": 2})).traffic_bytes
    sp = plan(scenario(parallel={"tp": 4, "global_batch": 2, "sequence_parallel": True})).traffic_bytes
    assert sp.by_primitive["all-reduce"] == 0
    assert sp.by_primitive["reduce-scatter"] == sp.by_primitive["all-gather"]
    assert sp.by_parallelism["tp"] == pytest.approx(plain.by_parallelism["tp"], rel=1e-6)


def test_full_recomputation_charges_a_forward_again_and_its_all_reduces():
    base = plan(scenario(parallel={"tp": 2, "global_batch": 2}))
    full = plan(scenario(parallel={"tp": 2, "global_batch": 2}, recompute="full"))
    # the layers' tp all-reduces go from 4 to 6 per layer; the embedding's and output layer's stay
    layers, m = 4, 2
    ring = 2 * 1 * 1024 * 4096 * 2
    assert full.traffic_bytes.by_parallelism["tp"] - base.traffic_bytes.by_parallelism["tp"] == 2 * layers * m * ring
    assert full.prediction.breakdown.compute_s > base.prediction.breakdown.compute_s


def test_the_distributed_optimizer_reduce_scatters_and_all_gathers():
    zero = plan(scenario(parallel={"dp": 4, "global_batch": 4, "zero": 1})).traffic_bytes
    assert zero.by_primitive["all-reduce"] == 0
    # gradients reduce-scattered in fp32, parameters gathered in bf16: (t-1)·M each
    assert zero.by_primitive["reduce-scatter"] == pytest.approx(2 * zero.by_primitive["all-gather"], rel=1e-6)


def test_presets_are_the_published_shapes():
    gpt3 = PRESETS["gpt3-175b"]
    params = gpt3.layers * (12 * gpt3.hidden ** 2) + gpt3.vocab * gpt3.hidden
    assert params == pytest.approx(175e9, rel=0.01)
    from testbed.workloads.llm.shape import Layers
    for name, billions in (("llama3-8b", 8.0), ("llama3-70b", 70.6), ("llama3-405b", 405.9)):
        arch = PRESETS[name]
        layers = Layers(arch, 1, 1)
        total = arch.layers * layers.layer_params() + 2 * layers.embedding_params()
        assert total / 1e9 == pytest.approx(billions, rel=0.01), name


def test_a_model_that_does_not_fit_is_refused_with_what_it_needs():
    with pytest.raises(InputError, match=r"needs .* GB per GPU .* but a h100 has 80 GB"):
        plan(scenario(model={"preset": "llama3-70b"}, parallel={"tp": 2, "global_batch": 1}))


@pytest.mark.parametrize(("workload", "says"), [
    ({"parallel": {"tp": 3, "global_batch": 1}}, "multiple of parallel.tp"),
    ({"parallel": {"pp": 3, "global_batch": 3}}, "multiple of parallel.pp"),
    ({"parallel": {"dp": 2, "global_batch": 3}}, "multiple of micro_batch × dp"),
    ({"parallel": {"pp": 2, "global_batch": 3, "schedule": "interleaved", "virtual_stages": 2}}, "multiple of pp"),
    ({"parallel": {"global_batch": 1, "order": "tp-dp"}}, "tp, dp and pp once each"),
    ({"parallel": {"global_batch": 1}, "device": "v100"}, "no bf16 tensor cores"),
    ({"parallel": {"global_batch": 1}, "device": "tpu"}, "unknown device"),
    ({"parallel": {"global_batch": 1}, "model": {"preset": "gpt4"}}, "unknown preset"),
    ({"parallel": {"global_batch": 1}, "model": {"hidden": 64}}, "needs layers"),
])
def test_what_cannot_be_split_is_refused_in_one_sentence(workload, says):
    with pytest.raises(InputError, match=says):
        scenario(**workload)


def test_names_are_case_insensitive_and_a_preset_field_can_be_overridden():
    found = scenario(model={"preset": "Llama3-8B", "layers": 2}, parallel={"dp": 2, "global_batch": 2}, device="H100",
                     precision="BF16")
    arch = found.workload.model.architecture()
    assert (arch.layers, arch.hidden, found.workload.device.name) == (2, 4096, "h100")


@pytest.mark.parametrize("parallel", [
    {"tp": 2, "pp": 2, "dp": 2, "global_batch": 16},
    {"tp": 2, "pp": 4, "dp": 2, "global_batch": 16, "sequence_parallel": True, "zero": 1},
    {"tp": 4, "pp": 2, "dp": 2, "global_batch": 16, "schedule": "gpipe"},
    {"tp": 2, "pp": 2, "dp": 2, "global_batch": 16, "schedule": "interleaved", "virtual_stages": 2},
    {"tp": 1, "pp": 4, "dp": 4, "global_batch": 32, "zero": 2},
])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_the_formulas_count_the_bytes_the_schedule_moves(parallel, recompute):
    """The closed form's traffic (for clusters too large to schedule) against the schedule's own count."""
    from testbed.workloads.llm.estimate import traffic_formula
    from testbed.workloads.llm.schedule import llm_schedule
    from testbed.workloads.traffic import traffic_bytes
    found = scenario(model={"preset": "llama3-8b", "layers": 8, "hidden": 1024, "ffn_hidden": 3584, "heads": 8,
                            "kv_heads": 8, "vocab": 8192, "seq_len": 1024, "tied_embeddings": True},
                     parallel=parallel, recompute=recompute)
    counted = traffic_bytes(llm_schedule(found.workload, found.fabric.hosts, "x"))
    formula = traffic_formula(found.workload)
    for name in ("tp", "pp", "dp"):
        assert formula.by_parallelism[name] == pytest.approx(counted.by_parallelism[name], abs=1024), name
    for name, value in counted.by_primitive.items():
        assert formula.by_primitive[name] == pytest.approx(value, abs=1024), name


def test_the_article_case_moves_what_the_hand_formulas_say():
    """GPT-3 175B, tp 8 × pp 8 × dp 16, batch 1,536, full recomputation (docs/large-models.md's
    worked example): predicted in closed form, all-reduce carrying nearly all of the bytes."""
    from testbed.planning.scenario_file import load_scenario

    from ..conftest import ROOT
    found = plan(load_scenario(ROOT / "scenarios" / "gpt3-175b-article.yaml"))
    a, m, dp, pp, t = 2048 * 12288 * 2, 96, 16, 8, 8
    per_micro = pp * 12 * (2 + 4) + 2  # every stage's layers (2 forward, 4 backward), embedding, output layer
    assert found.traffic_bytes.by_parallelism["tp"] == 2 * (t - 1) * a * per_micro * m * dp
    assert found.traffic_bytes.by_primitive["send-recv"] == 2 * m * (pp - 1) * a * t * dp
    h = 12288
    weights = 96 * (4 * h * h + 8 * h * h + 2 * h) + 2 * 51200 * h  # layers (attention, MLP, norms), embedding twice
    assert found.traffic_bytes.by_parallelism["dp"] == pytest.approx(2 * (dp - 1) * 4 * weights, rel=1e-9)
    assert found.traffic_bytes.by_primitive["all-reduce"] / found.traffic_bytes.total() > 0.98
    assert "closed form" in found.method
    assert found.gpu_memory.total() < 80e9


@settings(max_examples=15, deadline=None)
@given(gpus=st.sampled_from([2, 4, 8]), global_batch=st.sampled_from([8, 16]))
def test_search_lists_only_even_splits_that_fit_fastest_first(gpus, global_batch):
    from testbed.interface.api import search_splits
    found = scenario(parallel={"dp": gpus, "global_batch": global_batch},
                     model={"preset": "llama3-8b", "layers": 4, "hidden": 512, "ffn_hidden": 1024, "heads": 8,
                            "kv_heads": 8, "vocab": 1024, "seq_len": 256})
    splits = search_splits(found, top=50)
    assert splits and all(s.tp * s.pp * s.dp == gpus for s in splits)
    assert all(4 % s.pp == 0 and 8 % s.tp == 0 and (global_batch // s.dp) % s.micro_batch == 0 for s in splits)
    assert [s.iteration_s for s in splits] == sorted(s.iteration_s for s in splits)
    assert all(s.memory_bytes <= 80e9 for s in splits)


def test_search_says_when_nothing_fits():
    from testbed.interface.api import search_splits
    with pytest.raises(InputError, match="fits in a h100's memory"):
        search_splits(scenario(model={"preset": "llama3-70b", "layers": 80}, parallel={"dp": 2, "global_batch": 2}))


INA = {"kind": "ina", "gpu_bandwidth_gbps": 100, "latency_us": 2}


def test_gradients_summed_by_ina_leave_each_replica_once():
    """llama3-8b at 4 layers, dp 4 on an ina fabric: a ring all-reduce of M over 4 puts 2·3·M on the
    wire in all, INA 4·M (each replica sends its gradients to the node once; the sums are the node's)."""
    from testbed.workloads.llm.estimate import traffic_formula
    h = 4096
    attention = h * (h + 2 * 8 * 128) + h * h
    layer = attention + 3 * h * 14336 + 2 * h
    grads = (4 * layer + 2 * 128256 * h) * 4  # fp32, the embedding and output layer untied
    ring = plan(scenario(INA, parallel={"dp": 4, "global_batch": 4})).traffic_bytes
    found = plan(scenario(INA, parallel={"dp": 4, "global_batch": 4, "dp_algorithm": "INA"}))
    assert ring.by_parallelism["dp"] == pytest.approx(2 * 3 * grads, abs=64)
    assert found.traffic_bytes.by_parallelism["dp"] == pytest.approx(4 * grads, abs=64)
    assert traffic_formula(found.scenario.workload).by_parallelism["dp"] == pytest.approx(4 * grads, abs=64)
    assert found.prediction.iteration_time_s < plan(scenario(INA, parallel={"dp": 4, "global_batch": 4})
                                                     ).prediction.iteration_time_s


def _ina_wire_bytes(size: int) -> float:
    """What an INA all-reduce of `size` bytes costs a port, in TCP payload bytes: one frame per chunk
    of PAYLOAD_BYTES and one per ELEMENTS_PER_PACKET chunks' exponents, carried at 1514/1448 of
    the payload rate."""
    import math

    from testbed.shared.ina_rules import ELEMENTS_PER_PACKET, FRAME_BYTES, PAYLOAD_BYTES
    chunks = math.ceil(size / PAYLOAD_BYTES)
    return (chunks + math.ceil(chunks / ELEMENTS_PER_PACKET)) * FRAME_BYTES * 1448 / 1514


@pytest.mark.parametrize("aggregation_gbps", [None, 100])
def test_an_ina_all_reduce_streams_every_worker_through_its_port_and_the_node(aggregation_gbps):
    """Alone: 2α + W/B, W the frames' bytes; a node that sums 100 Gb/s for four 100 Gb/s workers
    gives each a quarter."""
    from testbed.model.schedule import CollectiveStep
    size, group = 10_000_000, (0, 1, 2, 3)
    gpus = tuple(GpuSchedule(g, (CollectiveStep("dp.ar", "allreduce", "ina", group, size),)) for g in group)
    fabric = scenario({**INA, "aggregation_gbps": aggregation_gbps},
                      parallel={"dp": 4, "global_batch": 4}).fabric
    found = simulate_schedule(Schedule("x", 4, 1, gpus), fabric)
    share = 4 if aggregation_gbps else 1
    assert found.iteration_time_s == pytest.approx(2 * 2e-6 + _ina_wire_bytes(size) * 8 * share / 100e9, rel=1e-9)


def test_an_ina_all_reduce_with_a_window_of_one_chunk_keeps_its_port_half_the_time():
    """fabric.slots 1: each worker may have one chunk outstanding, and sends the next only when its
    result is back a frame time later: 2α + 2W/B."""
    from testbed.model.schedule import CollectiveStep
    size, group = 10_000_000, (0, 1, 2, 3)
    gpus = tuple(GpuSchedule(g, (CollectiveStep("dp.ar", "allreduce", "ina", group, size),)) for g in group)
    fabric = scenario({**INA, "slots": 1}, parallel={"dp": 4, "global_batch": 4}).fabric
    found = simulate_schedule(Schedule("x", 4, 1, gpus), fabric)
    assert found.iteration_time_s == pytest.approx(2 * 2e-6 + 2 * _ina_wire_bytes(size) * 8 / 100e9, rel=1e-9)


def test_an_ina_stream_shares_its_port_with_what_runs_beside_it():
    """GPU 0 sends W bytes to GPU 1 while the four all-reduce through the node: GPU 0's port out and
    GPU 1's port in each carry two flows at B/2, so all three end at 2W/B; the others' streams
    finish at W/B and wait."""
    from testbed.model.schedule import CollectiveStep
    size, group = 10_000_000, (0, 1, 2, 3)
    wire = _ina_wire_bytes(size)
    ina = CollectiveStep("dp.ar", "allreduce", "ina", group, size)
    gpus = (GpuSchedule(0, (ina, SendStep("pp.s", 1, round(wire), "t"))),
            GpuSchedule(1, (ina, RecvStep("pp.r", 0, round(wire), "t"))),
            GpuSchedule(2, (ina,)), GpuSchedule(3, (ina,)))
    fabric = scenario(INA, parallel={"dp": 4, "global_batch": 4}).fabric
    found = simulate_schedule(Schedule("x", 4, 1, gpus, execution="dag"), fabric)
    assert found.iteration_time_s == pytest.approx(2 * wire * 8 / 100e9 + 2 * 2e-6, rel=1e-6)


@pytest.mark.parametrize(("fabric", "parallel", "says"), [
    (FAST, {"dp": 4, "global_batch": 4}, "needs an aggregation node"),
    ({**INA, "sharing": "shared"}, {"dp": 4, "global_batch": 4}, "reserved slots of a lossless node"),
    ({**INA, "link_loss_frac": 0.01}, {"dp": 4, "global_batch": 4}, "reserved slots of a lossless node"),
    ({**INA, "workers_per_job": 2}, {"dp": 2, "tp": 2, "global_batch": 2}, None),
    ({**INA, "workers_per_job": 4}, {"dp": 2, "tp": 2, "global_batch": 2}, "workers_per_job is 4"),
    ({**INA, "slots": 1}, {"dp": 2, "tp": 2, "global_batch": 2}, "raise slots to at least 2"),
    (INA, {"dp": 4, "global_batch": 4, "zero": 1}, "sums all-reduces only"),
    (INA, {"tp": 2, "global_batch": 1}, "needs dp ≥ 2"),
])
def test_ina_for_the_gradients_is_refused_where_it_cannot_run(fabric, parallel, says):
    if says is None:
        assert plan(scenario(fabric, parallel={**parallel, "dp_algorithm": "ina"})).prediction.iteration_time_s > 0
        return
    with pytest.raises(InputError, match=says):
        plan(scenario(fabric, parallel={**parallel, "dp_algorithm": "ina"}))


@pytest.mark.parametrize(("fabric", "parallel"), [
    ({"kind": "elect-flat", "gpu_bandwidth_gbps": 400, "latency_us": 2},
     {"tp": 2, "pp": 2, "dp": 4, "global_batch": 16}),
    # a replica (tp 4) fills a server of its own, so the servers are alike
    ({"kind": "elect-cluster", "gpus_per_server": 4, "gpu_bandwidth_gbps": 400, "server_uplink_gbps": 200,
      "latency_us": 2}, {"tp": 4, "pp": 1, "dp": 4, "global_batch": 16}),
])
def test_beyond_the_step_limit_one_replica_gives_the_whole_schedules_figure(monkeypatch, fabric, parallel):
    """Past SIMULATED_STEPS a symmetric fabric simulates one data-parallel replica for all, without
    building the others: the same figure the whole schedule's simulation gives."""
    from testbed.workloads.llm import kind
    from testbed.workloads.stepwise import STEPWISE
    whole = plan(scenario(fabric, parallel=parallel))
    assert len(whole.schedule.gpus) == 16 and whole.method == STEPWISE
    found = scenario(fabric, parallel=parallel)
    monkeypatch.setattr(kind, "SIMULATED_STEPS", kind.step_count(found.workload, 4))
    alone = plan(found)
    assert alone.schedule.gpus == () and alone.method == STEPWISE
    assert "one of 4 data-parallel replicas simulated" in alone.prediction.formula
    assert alone.prediction.iteration_time_s == whole.prediction.iteration_time_s
    assert alone.gpu_end_s == whole.gpu_end_s
    assert alone.traffic_bytes.total() == pytest.approx(whole.traffic_bytes.total(), rel=1e-6)


def test_past_the_step_limit_a_fabric_that_plans_links_answers_in_closed_form_and_says_why(monkeypatch):
    from testbed.workloads.llm import kind
    monkeypatch.setattr(kind, "SIMULATED_STEPS", 10)
    found = plan(scenario({"kind": "sip-ocs", "ocs_switches": 4, "gpu_bandwidth_gbps": 400, "latency_us": 2},
                          parallel={"tp": 2, "dp": 4, "global_batch": 16}))
    assert "closed form" in found.method and "not simulated" in found.prediction.formula

"""The DP all-reduce in gradient buckets, overlapping the backward pass: timed by hand on a
two-op model, in the plan oracle and in the schedule the hosts replay alike."""

from __future__ import annotations

import pytest
import yaml

from testbed.oracle.iteration import predict_plan
from testbed.oracle.schedule_sim import simulate_schedule
from testbed.placer.buckets import overlapped_finish_s
from testbed.planning.scenario_file import parse_scenario
from testbed.workloads.all_kinds import schedule_for
from testbed.workloads.model.plan import model_plan


def test_buckets_queue_on_one_ring():
    # ready at 1, 2 and 10 s, costs 2, 2, 1: 1+2 = 3, max(3, 2)+2 = 5, max(5, 10)+1 = 11
    assert overlapped_finish_s([(1, 2), (2, 2), (10, 1)]) == 11


def two_op_scenario(tmp_path, bucket_bytes: int, latency_us: float = 1, precision: str = "fp16"):
    """Ops a -> b, each 100 µs a sample and 10 MB of parameters; backward is twice forward.
    Pure data parallelism on 2 GPUs, one sample each, 100 Gb/s, α = 1 µs unless given."""
    profile = tmp_path / "two.yaml"
    profile.write_text(yaml.safe_dump({"name": "two", "ops": [
        {"name": "a", "compute_us_per_sample": 100, "output_bytes": 1000, "parameter_bytes": 10_000_000},
        {"name": "b", "compute_us_per_sample": 100, "output_bytes": 1000, "parameter_bytes": 10_000_000,
         "deps": ["a"]}]}))
    return parse_scenario({"name": "two", "fabric": {"kind": "elect-flat", "hosts": 2, "gpu_bandwidth_gbps": 100,
                                                     "latency_us": latency_us},
                           "workload": {"kind": "model", "model": {"name": "two", "profile": str(profile),
                                                                   "global_batch": 2, "mp": 1, "dp": 2,
                                                                   "dp_bucket_bytes": bucket_bytes,
                                                                   "gradient_precision": precision}}})


@pytest.mark.parametrize("bucket_bytes, latency_us, expected_us, sizes", [
    # Each op takes its time plus 1 µs of launch: a 0-101, b 101-202, b's backward 202-403, a's
    # 403-604 µs. A 10 MB bucket's ring all-reduce between 2 GPUs: 10 MB at 100 Gb/s (800 µs) + 2α.
    # b's gradients go at 403 (done 1205), a's wait for them: 1205 + 802 = 2007 µs.
    (10_000_000, 1, 2007, [10_000_000, 10_000_000]),
    # One bucket after the backward pass: 604 + 20 MB (1600 µs) + 2α = 2206 µs.
    (0, 1, 2206, [20_000_000]),
    # α = 1 ms: two buckets would take 403 + 800 + 2,000 = 3,203, then 3,203 + 2,800 = 6,003 µs;
    # fused into one (a framework's larger bucket cap): 604 + 1,600 + 2,000 = 4,204 µs.
    (10_000_000, 1000, 4204, [20_000_000]),
])
def test_overlap_by_hand_in_the_oracle_and_the_schedule(tmp_path, bucket_bytes, latency_us, expected_us, sizes):
    scenario = two_op_scenario(tmp_path, bucket_bytes, latency_us)
    plan = model_plan(scenario)
    assert predict_plan(plan, scenario.fabric).iteration_time_s * 1e6 == pytest.approx(expected_us, abs=0.5)
    schedule = schedule_for(scenario)
    assert schedule.execution == "dag"
    buckets = [s for s in schedule.gpus[0].steps if s.kind == "collective"]
    assert [s.bytes for s in buckets] == sizes
    assert simulate_schedule(schedule, scenario.fabric).iteration_time_s * 1e6 == \
        pytest.approx(expected_us, abs=0.5)


def test_fp32_gradients_move_twice_the_parameter_bytes(tmp_path):
    # One bucket of both ops' fp32 gradients, 2 × 20 MB: 604 + 40 MB at 100 Gb/s (3,200 µs) + 2α.
    scenario = two_op_scenario(tmp_path, 0, precision="fp32")
    plan = model_plan(scenario)
    assert plan.grad_bytes == (40_000_000,)
    assert predict_plan(plan, scenario.fabric).iteration_time_s * 1e6 == pytest.approx(3806, abs=0.5)
    assert [s.bytes for s in schedule_for(scenario).gpus[0].steps if s.kind == "collective"] == [40_000_000]


def test_buckets_hold_every_gradient_once():
    from testbed.planning.scenario_file import load_scenario

    from ..conftest import ROOT

    plan = model_plan(load_scenario(ROOT / "scenarios" / "placed-transformer.yaml"))
    for grads, buckets in zip(plan.grad_bytes, plan.buckets):
        assert sum(b.bytes for b in buckets) == pytest.approx(grads)
        assert all(b.bytes >= 25_000_000 for b in buckets[:-1])
        assert len({s for b in buckets for s in b.subops}) == sum(len(b.subops) for b in buckets)


def test_resnet_at_paper_scale_is_never_slower_on_a_faster_fabric():
    """SiP-ML's sweep: pure data parallelism at 1,024 GPUs. Fusing buckets at the bandwidth's own
    latency-bound size made 256 Gb/s slower than 128 (21.80 against 21.73 ms)."""
    from testbed.placer.plan import make_plan
    from testbed.placer.profiles import device
    from testbed.placer.zoo import MODELS
    from testbed.planning.scenario_file import make_fabric

    plan = make_plan(MODELS["resnet50"](), device("v100"), 1, 1024, 32768, None)
    times = [predict_plan(plan, make_fabric(kind="elect-flat", hosts=1024, gpu_bandwidth_gbps=b, latency_us=1))
             .iteration_time_s for b in (128, 256, 512, 1024, 2048, 4096, 8192)]
    assert all(later <= earlier for earlier, later in zip(times, times[1:])), times

"""Data-parallel replicas simulated once (testbed.oracle.replicas): on Elect-Flat and on
Elect-Cluster (servers of one replica each) the first replica alone gives the whole schedule's
prediction, by hand on small cases and against the whole simulation on placed and large models;
where simulating one replica would not be exact, the whole runs."""

from __future__ import annotations

import pytest

from testbed.model.schedule import CollectiveStep, ComputeStep, GpuSchedule, RecvStep, Schedule, SendStep
from testbed.oracle.iteration import predict_plan_fused
from testbed.oracle.replicas import Replicas, first_replica, simulate_replicated
from testbed.oracle.schedule_sim import simulate_counting_retunes
from testbed.planning.scenario_file import make_fabric, parse_scenario
from testbed.workloads.llm.kind import replicas_of
from testbed.workloads.llm.schedule import llm_schedule
from testbed.workloads.model.plan import model_plan, model_schedule


def two_stage(replicas: int, size: int, op: str = "allreduce", algorithm: str = "ring") -> Schedule:
    """Per replica: GPU 0 computes 100 µs and sends `size` bytes to GPU 1; then each GPU
    all-reduces `size` bytes with its counterparts in the other replicas."""
    gpus = []
    for r in range(replicas):
        a, b = 2 * r, 2 * r + 1
        evens, odds = tuple(range(0, 2 * replicas, 2)), tuple(range(1, 2 * replicas, 2))
        gpus.append(GpuSchedule(a, (ComputeStep("c", 100.0), SendStep("s", b, size, "t", ("c",)),
                                    CollectiveStep("dp", op, algorithm, evens, size, ("s",)))))
        gpus.append(GpuSchedule(b, (RecvStep("r", a, size, "t"),
                                    CollectiveStep("dp", op, algorithm, odds, size, ("r",)))))
    return Schedule("two-stage", 2 * replicas, 1, tuple(gpus), execution="in-order")


def test_one_replica_by_hand():
    """GPU 0 computes 100 µs, posts its 1 MB send and starts its ring all-reduce (each member sends
    2·3/4 of 1 MB to the next replica's): the two share its 8 Gb/s port, so the send takes 2 ms and
    arrives α = 5 µs later. GPU 1's ring then moves its 1.5 MB alone (1.5 ms) and ends 2·3 α after
    its data: 0.1 + 2 + 0.005 + 1.5 + 0.03 ms."""
    fabric = make_fabric(kind="elect-flat", hosts=8, gpu_bandwidth_gbps=8, latency_us=5)
    found = simulate_replicated(two_stage(4, 1_000_000), fabric, Replicas.blocks(8, 4))
    expected_s = (0.1 + 2 + 0.005 + 1.5 + 0.03) * 1e-3
    assert found.prediction.iteration_time_s == pytest.approx(expected_s, rel=1e-9)
    assert "one of 4 data-parallel replicas simulated" in found.prediction.formula
    assert len(found.gpu_end_s) == 8
    assert found.prediction.iteration_time_s == pytest.approx(
        simulate_counting_retunes(two_stage(4, 1_000_000), fabric).prediction.iteration_time_s, rel=1e-12)


@pytest.mark.parametrize("kind, op, algorithm", [("sip-ocs", "allreduce", "ring"),
                                                 ("elect-flat", "allreduce", "tree"),
                                                 ("elect-flat", "alltoall", "ring")])
def test_the_whole_runs_where_one_replica_would_not_be_exact(kind, op, algorithm):
    extra = {"ocs_switches": 4} if kind == "sip-ocs" else {}
    fabric = make_fabric(kind=kind, hosts=8, gpu_bandwidth_gbps=8, latency_us=5, **extra)
    assert first_replica(two_stage(4, 1_000_000, op, algorithm), Replicas.blocks(8, 4), fabric) is None


@pytest.mark.parametrize("model, hosts, mp", [("transformer", 64, 8), ("resnet50", 32, 4), ("transformer", 16, 2)])
def test_placed_models_predict_as_the_whole_simulation(model, hosts, mp):
    scenario = parse_scenario({"name": "replicas", "seed": 1,
                               "fabric": {"kind": "elect-flat", "hosts": hosts, "gpu_bandwidth_gbps": 1000,
                                          "latency_us": 1},
                               "workload": {"kind": "model", "model": {"name": model, "mp": mp, "dp": hosts // mp,
                                                                       "global_batch": 2 * hosts}}}, "test")
    plan = model_plan(scenario)
    schedule = model_schedule(scenario, plan, predict_plan_fused(plan, scenario.fabric)[1])
    whole = simulate_counting_retunes(schedule, scenario.fabric)
    replicas = Replicas.blocks(hosts, plan.l)
    alone = simulate_replicated(schedule, scenario.fabric, replicas)
    assert first_replica(schedule, replicas, scenario.fabric) is not None
    assert alone.prediction.iteration_time_s == pytest.approx(whole.prediction.iteration_time_s, rel=1e-9)
    assert alone.message_bps.keys() == whole.message_bps.keys()
    assert alone.gpu_end_s == pytest.approx(whole.gpu_end_s, rel=1e-9)


def test_elect_cluster_replicas_by_hand():
    """Each replica one server of 2 GPUs, uplinks of 8 Gb/s. GPU 0's send stays in its server and
    shares its port with its ring (2 ms, as on Elect-Flat); the ring's edge leaves the server. From
    2.105 ms GPU 1's ring shares the uplink with GPU 0's last 495 kB (4 Gb/s each: 0.99 ms), then
    moves its remaining 1.005 MB alone (1.005 ms), and ends 6α later: 4.13 ms."""
    fabric = make_fabric(kind="elect-cluster", hosts=8, gpus_per_server=2, gpu_bandwidth_gbps=8,
                         server_uplink_gbps=8, latency_us=5)
    found = simulate_replicated(two_stage(4, 1_000_000), fabric, Replicas.blocks(8, 4))
    assert "one of 4 data-parallel replicas simulated" in found.prediction.formula
    assert found.prediction.iteration_time_s == pytest.approx(4.13e-3, rel=1e-9)


def test_a_server_shared_by_two_replicas_is_simulated_whole():
    """Replicas of 2 GPUs on servers of 4: a server's edges to the next replica need not leave it."""
    fabric = make_fabric(kind="elect-cluster", hosts=8, gpus_per_server=4, gpu_bandwidth_gbps=8,
                         server_uplink_gbps=8, latency_us=5)
    found = simulate_replicated(two_stage(4, 1_000_000), fabric, Replicas.blocks(8, 4))
    assert "replicas simulated" not in found.prediction.formula
    assert found.prediction.iteration_time_s == pytest.approx(
        simulate_counting_retunes(two_stage(4, 1_000_000), fabric).prediction.iteration_time_s, rel=1e-12)


@pytest.mark.parametrize("tp, pp, dp, per_server", [(4, 2, 2, 4), (2, 2, 4, 2)])
def test_large_models_on_elect_cluster_predict_as_the_whole_simulation(tp, pp, dp, per_server):
    hosts = tp * pp * dp
    model = {"preset": "llama3-8b", "layers": 8, "hidden": 1024, "ffn_hidden": 3584, "heads": 8, "kv_heads": 8,
             "vocab": 8192, "seq_len": 1024}
    scenario = parse_scenario({"name": "replicas", "seed": 1,
                               "fabric": {"kind": "elect-cluster", "hosts": hosts, "gpus_per_server": per_server,
                                          "gpu_bandwidth_gbps": 400, "server_uplink_gbps": 400, "latency_us": 1},
                               "workload": {"kind": "llm", "model": model, "precision": "bf16", "device": "h100",
                                            "parallel": {"tp": tp, "pp": pp, "dp": dp, "micro_batch": 1,
                                                         "global_batch": 8 * dp, "zero": 1}}}, "test")
    schedule = llm_schedule(scenario.workload, hosts, "replicas")
    replicas = replicas_of(scenario.workload, hosts)
    alone = simulate_replicated(schedule, scenario.fabric, replicas)
    assert "replicas simulated" in alone.prediction.formula
    assert alone.prediction.iteration_time_s == pytest.approx(
        simulate_counting_retunes(schedule, scenario.fabric).prediction.iteration_time_s, rel=1e-9)

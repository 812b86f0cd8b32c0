"""Several jobs on one fabric: the scenario format, each job's schedule on its hosts, and the
interference the oracle prices (hand values)."""

from __future__ import annotations

import pytest

from testbed.fabrics.scenario_file import parse_scenario
from testbed.model.errors import InputError
from testbed.planning.predict import predict_jobs
from testbed.planning.workloads import schedule_for

CLUSTER = {"kind": "elect-cluster", "hosts": 16, "gpus_per_server": 4, "gpu_bandwidth_gbps": 100,
           "server_uplink_gbps": 100, "latency_us": 5}


def ring(size: int = 50_000_000, iterations: int = 3) -> dict:
    return {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "bytes": size,
            "iterations": iterations}


def scenario(jobs: list, fabric: dict = CLUSTER):
    return parse_scenario({"name": "jobs", "fabric": fabric, "jobs": jobs}, "jobs.yaml")


def test_interleaved_ring_jobs_share_every_uplink():
    """Job a takes two GPUs of each server, b the other two. Alone, a's ring crosses each server's
    uplink once: 14 steps of α + (M/8)/B. Together each uplink carries one step of each job: B/2.
    Hand: alone 14·(5 µs + 6.25 MB·8/100 Gb/s) = 7.07 ms, together 14·(5 µs + 1 ms) = 14.07 ms."""
    s = scenario([{"name": "a", "gpus": [0, 1, 4, 5, 8, 9, 12, 13], "workload": ring()},
                  {"name": "b", "gpus": 8, "workload": ring(iterations=2)}])
    assert [gpus for _, gpus in s.job_gpus()][1] == [2, 3, 6, 7, 10, 11, 14, 15]
    assert s.workload.kind == "jobs" and s.workload.iterations == 3
    prediction, jobs = predict_jobs(s)
    for job in jobs:
        assert job.alone_s == pytest.approx(14 * (5e-6 + 6.25e6 * 8 / 100e9), rel=1e-6)
        assert job.together_s == pytest.approx(14 * (5e-6 + 6.25e6 * 8 / 50e9), rel=1e-6)
    assert prediction.iteration_time_s == pytest.approx(max(j.together_s for j in jobs))


def test_jobs_on_separate_servers_do_not_interfere():
    s = scenario([{"name": "a", "gpus": 8, "workload": ring()}, {"name": "b", "gpus": 8, "workload": ring()}])
    _, jobs = predict_jobs(s)
    assert all(j.together_s == pytest.approx(j.alone_s, rel=1e-9) for j in jobs)


def test_each_job_runs_on_its_own_hosts():
    s = scenario([{"name": "p", "gpus": [3, 7], "workload": {"kind": "collective", "collective": "sendrecv",
                                                           "algorithm": "ring", "bytes": 1000, "iterations": 1}}],
                 {**CLUSTER, "hosts": 8})
    schedule = schedule_for(s)
    by_host = {g.rank: g.steps for g in schedule.gpus}
    assert all(not by_host[h] for h in (0, 1, 2, 4, 5, 6))
    assert {step.group for step in by_host[3]} == {(3, 7)} and by_host[3][0].id.startswith("p/")
    assert schedule.traffic_matrix_bytes[3][7] == 1000 and schedule.traffic_matrix_bytes[7][3] == 1000


@pytest.mark.parametrize("jobs, words", [
    ([{"name": "a", "gpus": [0, 1], "workload": ring()}, {"name": "b", "gpus": [1, 2], "workload": ring()}],
     "jobs 'a' and 'b' both use GPU 1"),
    ([{"name": "a", "gpus": 10, "workload": ring()}, {"name": "b", "gpus": 8, "workload": ring()}],
     "job 'b' asks for 8 GPUs but only 6"),
    ([{"name": "a", "gpus": [0, 16], "workload": ring()}], "distinct hosts in 0..15"),
    ([{"name": "a", "gpus": 2, "workload": ring()}, {"name": "a", "gpus": 2, "workload": ring()}],
     "two jobs are named 'a'"),
    ([{"name": "m", "gpus": 4, "workload": {"kind": "model", "model": {"name": "resnet50", "global_batch": 8,
                                                                          "mp": 2, "dp": 1}}}],
     "mp×dp = 2 must equal its 4 GPUs"),
    ([{"name": "ps", "gpus": 4, "workload": {**ring(), "algorithm": "byteps"}}], "cannot use algorithm byteps"),
])
def test_bad_jobs_are_one_sentence(jobs, words):
    with pytest.raises(InputError, match=words):
        scenario(jobs)


def test_workload_and_jobs_together_are_refused():
    with pytest.raises(InputError, match="either workload .* or jobs"):
        parse_scenario({"name": "x", "fabric": CLUSTER, "workload": ring(),
                        "jobs": [{"name": "a", "gpus": 2, "workload": ring()}]}, "x.yaml")


def test_sweeps_override_a_jobs_field_by_index():
    from testbed.fabrics.scenario_file import apply_overrides

    s = scenario([{"name": "a", "gpus": [0, 1, 4, 5, 8, 9, 12, 13], "workload": ring()},
                  {"name": "b", "gpus": 8, "workload": ring()}])
    changed = apply_overrides(s, {"jobs.1.gpus": 4, "jobs.0.workload.bytes": 1_000_000})
    assert [gpus for _, gpus in changed.job_gpus()] == [[0, 1, 4, 5, 8, 9, 12, 13], [2, 3, 6, 7]]
    assert changed.jobs[0].workload.bytes == 1_000_000
    with pytest.raises(InputError, match="jobs has items 0..1, not '5'"):
        apply_overrides(s, {"jobs.5.gpus": 4})

"""Several jobs on one fabric: the scenario format, each job's schedule on its hosts, and the
interference the oracle prices (hand values)."""

from __future__ import annotations

import pytest

from testbed.model.errors import InputError
from testbed.planning.plan import predict_jobs
from testbed.planning.scenario_file import parse_scenario
from testbed.workloads.all_kinds import schedule_for

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
     "mp×dp = 2×1 = 2 must equal its 4 GPUs"),
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
    from testbed.planning.overrides import apply_overrides

    s = scenario([{"name": "a", "gpus": [0, 1, 4, 5, 8, 9, 12, 13], "workload": ring()},
                  {"name": "b", "gpus": 8, "workload": ring()}])
    changed = apply_overrides(s, {"jobs.1.gpus": 4, "jobs.0.workload.bytes": 1_000_000})
    assert [gpus for _, gpus in changed.job_gpus()] == [[0, 1, 4, 5, 8, 9, 12, 13], [2, 3, 6, 7]]
    assert changed.jobs[0].workload.bytes == 1_000_000
    with pytest.raises(InputError, match="jobs has items 0..1, not '5'"):
        apply_overrides(s, {"jobs.5.gpus": 4})


def test_each_job_keeps_a_barrier_of_its_own_and_idle_hosts_one_each():
    """The agents' barrier groups: each job's hosts with its own measured iterations; a GPU no job
    uses is alone (it has no steps); one job keeps the single barrier of every host."""
    from testbed.shared.collective_plans import barrier_ring_next

    s = scenario([{"name": "a", "gpus": [0, 2, 4, 6], "workload": ring(iterations=2)},
                  {"name": "b", "gpus": 4, "workload": ring(iterations=5)}])
    groups = s.paced_groups(16)
    assert groups[:2] == [([0, 2, 4, 6], 2), ([1, 3, 5, 7], 5)]
    assert groups[2:] == [([h], 1) for h in range(8, 16)]
    assert [barrier_ring_next(r, [1, 3, 5, 7]) for r in (1, 3, 5, 7)] == [3, 5, 7, 1]
    one = parse_scenario({"name": "one", "fabric": CLUSTER, "workload": ring()}, "one.yaml")
    assert one.paced_groups(16) == []


OCS = {"kind": "sip-ocs", "hosts": 8, "gpu_bandwidth_gbps": 100, "latency_us": 5, "ocs_switches": 4}


def test_partitioned_ocs_gives_each_job_its_switches_alone():
    """Two 4-GPU rings on 4 OCSes: shared, each GPU's 4 ports carry its ring (4 circuits of B/4 to
    its next GPU, rate B); partitioned, each job has 2 switches (B/2). Hand, M = 40 MB:
    6·(5 µs + 10 MB·8/100 Gb/s) = 4.83 ms shared, 6·(5 µs + 10 MB·8/50 Gb/s) = 9.63 ms partitioned."""
    jobs = [{"name": name, "gpus": 4, "workload": ring(40_000_000)} for name in ("a", "b")]
    _, shared = predict_jobs(scenario(jobs, OCS))
    s = parse_scenario({"name": "jobs", "fabric": OCS, "jobs": jobs, "job_sharing": "partitioned"}, "jobs.yaml")
    _, partitioned = predict_jobs(s)
    for job in shared:
        assert job.together_s == pytest.approx(6 * (5e-6 + 10e6 * 8 / 100e9), rel=1e-6)
    for job in partitioned:
        assert job.together_s == pytest.approx(6 * (5e-6 + 10e6 * 8 / 50e9), rel=1e-6)
        assert job.alone_s == pytest.approx(job.together_s, rel=1e-9)  # its share, whatever the other does


def test_partitioned_link_state_keeps_each_job_on_its_share():
    """The controller's state: SiP-OCS circuits of job a on switches 0-1 only, b's on 2-3, none
    between the jobs; SiP-Ring lightpaths within each job, at most W·4/8 wavelengths a GPU."""
    from testbed.fabrics.programming import plan_for
    from testbed.fabrics.topology import build_topology

    groups = ((0, 1, 2, 3), (4, 5, 6, 7))
    traffic = {(src, (src - 4 * (src // 4) + 1) % 4 + 4 * (src // 4)): 1e7 for src in range(8)}
    ocs = parse_scenario({"name": "o", "fabric": OCS, "workload": ring()}, "o.yaml").fabric
    state = plan_for(build_topology(ocs, "1", 100e9, "user"), ocs, traffic, tuple(traffic), partitions=groups)
    assert state and all((i < 4) == (j < 4) == (switch < 2) for switch, i, j in state)
    ring_fabric = {"kind": "sip-ring", "hosts": 8, "gpu_bandwidth_gbps": 200, "wavelengths": 8,
                   "wavelength_gbps": 25, "neighbors": 4}
    sip = parse_scenario({"name": "r", "fabric": ring_fabric, "workload": ring()}, "r.yaml").fabric
    lightpaths = plan_for(build_topology(sip, "1", 200e9, "user"), sip, traffic, tuple(traffic), partitions=groups)
    assert all((i < 4) == (j < 4) for i, j in lightpaths)
    for g in range(8):
        assert sum(w for (i, _), w in lightpaths.items() if i == g) <= 4
        assert sum(w for (_, j), w in lightpaths.items() if j == g) <= 4


def test_partitioned_needs_jobs_a_fabric_with_shares_and_a_share_for_each():
    with pytest.raises(InputError, match="job_sharing: partitioned"):
        parse_scenario({"name": "one", "fabric": OCS, "workload": ring(), "job_sharing": "partitioned"}, "x.yaml")
    jobs = [{"name": "a", "gpus": 8, "workload": ring()}, {"name": "b", "gpus": 8, "workload": ring()}]
    cluster = parse_scenario({"name": "c", "fabric": CLUSTER, "jobs": jobs, "job_sharing": "partitioned"}, "c.yaml")
    with pytest.raises(InputError, match="sip-ocs, sip-ring"):
        schedule_for(cluster)
    small = [{"name": "a", "gpus": 1, "workload": {"kind": "collective", "collective": "allreduce",
                                                   "algorithm": "ring", "bytes": 1000}},
             {"name": "b", "gpus": 7, "workload": ring()}]
    crowded = parse_scenario({"name": "s", "fabric": OCS, "jobs": small, "job_sharing": "partitioned"}, "s.yaml")
    with pytest.raises(InputError, match="gets none of 4"):
        schedule_for(crowded)


def test_partitioned_multi_shot_jobs_re_plan_apart_and_ignore_each_other():
    """Two placed ResNet-50s re-planned every period on 2 switches each of 4: a job's time alone
    is its time together (its share is its own), and slower than sharing all 4 (half the ports).
    Both jobs retune at the same instants, so every flow waits out the same dark windows."""
    model = {"kind": "model", "model": {"name": "resnet50", "global_batch": 32, "mp": 4, "dp": 1}, "iterations": 2}
    fabric = {**OCS, "reconfig_us": 200, "multi_shot": True}
    jobs = [{"name": "a", "gpus": 4, "workload": model}, {"name": "b", "gpus": 4, "workload": model}]
    _, shared = predict_jobs(scenario(jobs, fabric))
    s = parse_scenario({"name": "jobs", "fabric": fabric, "jobs": jobs, "job_sharing": "partitioned"}, "jobs.yaml")
    _, partitioned = predict_jobs(s)
    for alone, together in zip(shared, partitioned):
        assert together.together_s == pytest.approx(together.alone_s, rel=1e-9)
        assert together.together_s > alone.together_s

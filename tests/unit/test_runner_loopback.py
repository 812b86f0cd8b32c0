"""testbed.emulation.run's orchestration, without root: the Runner against the loopback fabric
(real agent processes, real sockets, real sums, no Mininet). A run completes with every sum
checked; an agent killed mid-run fails the run with what it measured and nothing left running;
Ctrl-C at start-up is an interrupted run that still cleans up and writes its run directory. The
same behaviours on Mininet are the root tests' (tests/integration)."""

from __future__ import annotations

import json

import pytest

from testbed.core.calibration import DEFAULT_CALIBRATION
from testbed.emulation.loopback import LoopbackBackend
from testbed.emulation.run import Runner
from testbed.interface.report import run_report
from testbed.model.errors import RunFailed
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import parse_scenario

HOSTS = 4


def _scenario(**extra):
    data = {
        "name": "loopback-ring",
        "seed": 3,
        "fabric": {"kind": "elect-flat", "hosts": HOSTS, "gpu_bandwidth_gbps": 100, "latency_us": 5},
        "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "bytes": 400_000,
                     "iterations": 3},
        # Fixed sizing: nothing of it depends on this machine's calibration.
        "emulation": {"dilation": 200, "byte_scale": 1, "warmup_iterations": 1},
    }
    data.update(extra)
    return parse_scenario(data, "loopback test")


@pytest.fixture
def registry(tmp_path, monkeypatch):
    directory = tmp_path / "registry"
    monkeypatch.setenv("TESTBED_REGISTRY_DIR", str(directory))
    return directory


def _run(scenario, run_dir, **runner_options):
    prepared = prepare(scenario, DEFAULT_CALIBRATION)
    runner = Runner(prepared, run_dir, backend=LoopbackBackend(), **runner_options)
    return runner, runner.execute()


def _nothing_left(runner, registry):
    assert not list(registry.glob("*.json")), "the run's registry record outlived it"
    for process in runner.agents + runner.agents_extra:
        assert process.poll() is not None, f"agent {process.pid} still runs"


def test_a_run_completes_with_every_sum_checked(tmp_path, registry):
    progress = []
    runner, result = _run(_scenario(), tmp_path / "run", on_progress=lambda done, total: progress.append(done))
    assert result["status"] == "ok", result.get("error")
    assert result["sums_correct"] is True
    assert len(result["iteration_times_s"]) == 3 and result["iterations_completed"] == 3
    assert progress[-1] == 3 and progress == sorted(progress)
    for name in ("scenario.yaml", "schedule.json", "topology.json", "events.jsonl", "results.json"):
        assert (tmp_path / "run" / name).is_file(), name
    assert json.loads((tmp_path / "run" / "results.json").read_text())["status"] == "ok"
    timings = result["timings_s"]
    assert timings["agents_launched_s"] <= timings["agents_connected_s"] <= timings["agents_done_s"] \
        <= timings["torn_down_s"]
    _nothing_left(runner, registry)


def test_an_agent_killed_mid_run_fails_the_run_and_leaves_nothing_running(tmp_path, registry):
    scenario = _scenario(workload={"kind": "collective", "collective": "allreduce", "algorithm": "ring",
                                   "bytes": 400_000, "iterations": 1000},
                         faults=[{"kind": "agent_kill", "at_ms": 50, "host": 2}])
    runner, result = _run(scenario, tmp_path / "run")
    assert result["status"] == "failed"
    assert "GPU 2's agent killed" in result["error"]
    assert result["iterations_completed"] < 1000 and result["sums_correct"] is False
    assert result["fidelity"]["ok"] is False
    assert (tmp_path / "run" / "results.json").is_file()
    _nothing_left(runner, registry)


def test_ctrl_c_at_start_up_is_an_interrupted_run_that_still_cleans_up(tmp_path, registry):
    def interrupt():
        raise KeyboardInterrupt

    runner, result = _run(_scenario(), tmp_path / "run", on_started=interrupt)
    assert result["status"] == "interrupted"
    assert "SIGINT" in result["error"]
    assert (tmp_path / "run" / "results.json").is_file()
    _nothing_left(runner, registry)


def test_the_loopback_fabric_refuses_what_it_cannot_stand_in_for(tmp_path, registry):
    scenario = _scenario(fabric={"kind": "sip-ring", "hosts": HOSTS, "gpu_bandwidth_gbps": 100, "wavelengths": 4})
    prepared = prepare(scenario, DEFAULT_CALIBRATION)
    with pytest.raises(RunFailed, match="switched fabrics only"):
        with LoopbackBackend().open(prepared.scenario.fabric, prepared.plan.host_rate_bps, tmp_path):
            pass


def test_two_jobs_run_together_with_each_jobs_sums_and_times(tmp_path, registry):
    """Two ring all-reduces on two pairs of one fabric, each at its own pace: each job's iterations
    and prediction; the quick job keeps loading the fabric until the slow one has its iterations."""
    def ring(size: int, iterations: int) -> dict:
        return {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "bytes": size,
                "iterations": iterations}
    scenario = parse_scenario({
        "name": "loopback-jobs", "seed": 3,
        "fabric": {"kind": "elect-flat", "hosts": HOSTS, "gpu_bandwidth_gbps": 100, "latency_us": 5},
        "jobs": [{"name": "a", "gpus": [0, 2], "workload": ring(400_000, 2)},
                 {"name": "b", "gpus": 2, "workload": ring(4_000_000, 3)}],
        "emulation": {"dilation": 200, "byte_scale": 1, "warmup_iterations": 1}}, "loopback test")
    runner, result = _run(scenario, tmp_path / "run")
    assert result["status"] == "ok", result.get("error")
    assert result["sums_correct"] is True
    assert set(result["jobs"]) == {"a", "b"}
    assert result["jobs"]["b"]["gpus"] == [1, 3]
    a, b = result["jobs"]["a"], result["jobs"]["b"]
    assert (len(a["iteration_times_s"]), len(b["iteration_times_s"])) == (2, 3)
    # Alone on Elect-Flat: 2(α + (M/2)/B), M = 400 kB and 4 MB (the pairs share no link)
    assert a["predicted_iteration_time_s"] == pytest.approx(2 * (5e-6 + 200_000 * 8 / 100e9), rel=1e-6)
    assert b["predicted_iteration_time_s"] == pytest.approx(2 * (5e-6 + 2_000_000 * 8 / 100e9), rel=1e-6)
    assert result["iterations_planned"] == 2 and result["iteration_times_s"] == a["iteration_times_s"]
    rounds: dict[int, int] = {}
    for line in (tmp_path / "run" / "hosts" / "progress").read_text().split("\n"):
        if line:
            rank, round_ = map(int, line.split()[:2])
            rounds[rank] = max(rounds.get(rank, 0), round_ + 1)
    # b: its warm-up and 3 iterations; a, ten times quicker, more than its 1 + 2 (loading rounds)
    assert rounds[1] == rounds[3] == 4
    assert rounds[0] == rounds[2] > 3
    report = (run_report(tmp_path / "run")).read_text()
    assert "| b | 2 | 2 |" in report and "jobs.png" in report
    _nothing_left(runner, registry)


def test_a_plan_that_cuts_the_agents_barrier_ring_is_refused_before_the_agents_start(tmp_path):
    broadcast = {"kind": "collective", "collective": "broadcast", "algorithm": "tree", "bytes": 400_000}
    runner = Runner(prepare(_scenario(workload=broadcast), DEFAULT_CALIBRATION), tmp_path / "run",
                    backend=LoopbackBackend())
    assert {(0, 3), (3, 0)}.isdisjoint(runner.prepared.schedule.traffic())  # the tree never joins them
    runner._check_reachable([])  # nothing cut: nothing to say
    # GPUs 3 and 0 are neighbours on the barrier's ring of 4 (3 -> 0), and TCP needs both ways.
    with pytest.raises(RunFailed, match="from GPU 0 to GPU 3, neighbours in the agents' barrier"):
        runner._check_reachable([(0, 3)])

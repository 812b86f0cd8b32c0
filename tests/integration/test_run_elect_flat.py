"""End-to-end runs on Mininet + Open vSwitch + os-ken: timing tolerance, sums, cleanup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from testbed.emulation.run import Runner
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario, parse_scenario

from ..conftest import ROOT
from .conftest import (
    RATIO_BAND,
    assert_faithful,
    assert_faithful_but_for_machine_loss,
    assert_iterations_match_the_oracle,
    assert_monitor_ok,
    assert_ratio_in_band,
    disturbed_iterations,
)

pytestmark = pytest.mark.root

def test_quickstart_is_faithful_and_correct(tmp_path, machine_state):
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert len(result["iteration_times_s"]) == 3
    assert_iterations_match_the_oracle(result)
    for name in ("scenario.yaml", "schedule.json", "topology.json", "events.jsonl", "results.json", "timeline.png"):
        assert (tmp_path / "run" / name).is_file(), name
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    kinds = {e["kind"] for e in events}
    assert {"send", "recv", "collective", "iteration"} <= kinds
    resolved = (tmp_path / "run" / "scenario.yaml").read_text()
    assert "dilation: auto" not in resolved and "byte_scale: auto" not in resolved


def test_four_hosts_with_fixed_dilation(tmp_path, machine_state):
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "quickstart.yaml"),
                               {"fabric.hosts": 4, "workload.iterations": 2, "emulation.dilation": 150})
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["dilation"] == 150 and result["sums_correct"]
    assert_iterations_match_the_oracle(result)


def start_long_run(tmp_path: Path, registry: Path) -> tuple[subprocess.Popen, Path]:
    scenario = tmp_path / "long.yaml"
    text = (ROOT / "scenarios" / "quickstart.yaml").read_text().replace("iterations: 3", "iterations: 40")
    scenario.write_text(text)
    out = tmp_path / "run"
    env = dict(os.environ, TESTBED_REGISTRY_DIR=str(registry))
    process = subprocess.Popen([sys.executable, "-m", "testbed", "run", str(scenario), "--out", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    progress = out / "hosts" / "progress"
    deadline = time.monotonic() + 90
    while not (progress.exists() and progress.read_text().strip()):  # mid-run: an iteration has finished
        assert process.poll() is None, process.stdout.read()
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.05)
    return process, out


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_cleans_up_and_keeps_what_it_measured(tmp_path, machine_state, scratch_registry, signum):
    process, out = start_long_run(tmp_path, scratch_registry)
    process.send_signal(signum)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 1, output
    assert "Traceback" not in output
    result = json.loads((out / "results.json").read_text())
    assert result["status"] == "interrupted"
    assert (out / "scenario.yaml").is_file() and (out / "topology.json").is_file()


def test_sigkilled_run_is_cleaned_by_testbed_clean(tmp_path, machine_state, scratch_registry):
    process, _ = start_long_run(tmp_path, scratch_registry)
    process.kill()
    process.wait(timeout=10)
    assert list(scratch_registry.glob("*.json")), "a killed run should leave its record behind"
    env = dict(os.environ, TESTBED_REGISTRY_DIR=str(scratch_registry))
    out = subprocess.run([sys.executable, "-m", "testbed", "clean"], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "1 dead run" in out.stdout


@pytest.mark.parametrize("collective, algorithm, hosts", [
    ("allreduce", "halving-doubling", 5),
    ("allreduce", "tree", 4),
    ("alltoall", "ring", 4),
    ("broadcast", "tree", 5),
])
def test_other_collectives_give_exact_results_over_mininet(tmp_path, machine_state, collective, algorithm, hosts):
    from testbed.planning.scenario_file import parse_scenario

    scenario = parse_scenario({
        "name": f"it-{collective}", "seed": 7,
        "fabric": {"kind": "elect-flat", "hosts": hosts, "gpu_bandwidth_gbps": 100, "latency_us": 5},
        "workload": {"kind": "collective", "collective": collective, "algorithm": algorithm, "bytes": 20_000_000,
                     "iterations": 1},
    })
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"] and len(result["iteration_times_s"]) == 1


def test_overdriven_run_is_flagged_and_auto_dilation_fixes_it(tmp_path, machine_state):
    scenario = load_scenario(ROOT / "scenarios" / "overdriven.yaml")
    result = Runner(prepare(scenario), tmp_path / "over").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    monitors = result["fidelity"]["monitors"]
    assert not result["fidelity"]["ok"]
    assert not monitors["capacity"]["ok"] and not monitors["link_rate"]["ok"]
    auto = apply_overrides(scenario, {"emulation.dilation": "auto", "emulation.byte_scale": "auto"})
    result = Runner(prepare(auto), tmp_path / "auto").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert_faithful(result)


def test_placed_model_schedule_replays_on_elect_flat(tmp_path, machine_state):
    """Compute, point-to-point and DP all-reduce steps of a placer schedule, over Mininet."""
    scenario = load_scenario(ROOT / "scenarios" / "placed-resnet.yaml")
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"] and len(result["iteration_times_s"]) == 1
    # One iteration, so nothing averages out its slowest message: a wider band than RATIO_BAND.
    assert_ratio_in_band(result, 0, (0.8, 1.2))
    assert_monitor_ok(result, "compute_timing")
    kinds = {json.loads(line)["kind"] for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()}
    assert {"compute", "send", "recv", "collective"} <= kinds


def test_two_jobs_sharing_every_uplink_each_match_their_prediction(tmp_path, machine_state):
    """scenarios/two-jobs-cluster.yaml: two rings interleaved on a 16-GPU Elect-Cluster; each job
    takes twice its time alone (hand: 14.07 ms against 7.07 ms) and emulates within the band."""
    data = yaml.safe_load((ROOT / "scenarios" / "two-jobs-cluster.yaml").read_text())
    for job in data["jobs"]:
        job["workload"]["iterations"] = 2
    scenario = parse_scenario(data, "two-jobs-cluster.yaml")
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert_faithful_but_for_machine_loss(result)
    assert set(result["jobs"]) == {"a", "b"}
    for job in result["jobs"].values():
        assert job["predicted_iteration_time_s"] == pytest.approx(14 * (5e-6 + 6.25e6 * 8 / 50e9), rel=1e-6)
        assert len(job["iteration_times_s"]) == 2
        disturbed = disturbed_iterations(result)
        for i, ratio in enumerate(job["emulated_over_predicted"]):
            assert RATIO_BAND[0] <= ratio and (ratio <= RATIO_BAND[1] or i in disturbed), job

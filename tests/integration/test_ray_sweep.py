"""`testbed sweep --ray local` on a Ray cluster started for the test: emulated points take turns on
the machine's one `testbed` resource, predicted points run side by side on both CPUs; Ctrl-C
cancels what is in flight (the emulation cleans up) and the same command resumes."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import ROOT
from .conftest import assert_iterations_match_the_oracle, processes_matching

pytestmark = pytest.mark.root

RAY_MARKERS = ("raylet", "gcs_server", "ray::", "default_worker.py")


def ray_processes() -> set[int]:
    return processes_matching(RAY_MARKERS)


def points_of(out: Path) -> dict[str, dict]:
    return {p.name: json.loads((p / "sweep_point.json").read_text())
            for p in (out / "runs").iterdir() if (p / "sweep_point.json").exists()}


def assert_ray_stopped(before: set[int]) -> None:
    deadline = time.monotonic() + 30
    while ray_processes() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not ray_processes() - before, "the sweep left Ray processes behind"


def test_emulated_points_take_turns_and_the_sweep_resumes_after_ctrl_c(tmp_path, machine_state):
    ray_before = ray_processes()
    scenario = tmp_path / "small.yaml"
    scenario.write_text((ROOT / "scenarios" / "quickstart.yaml").read_text()
                        .replace("hosts: 8", "hosts: 4").replace("iterations: 3", "iterations: 2"))
    out = tmp_path / "sweep"
    command = [sys.executable, "-m", "testbed", "sweep", str(scenario), "--ray", "local", "--out", str(out),
               "--set", "fabric.gpu_bandwidth_gbps=100,400,1600"]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and first.poll() is None:
        if (out / "runs").is_dir() and points_of(out):
            break
        time.sleep(0.2)
    first.send_signal(signal.SIGINT)  # one point came back; the next is running or about to
    _, err = first.communicate(timeout=180)
    assert first.returncode == 1 and "resume" in err, err
    assert_ray_stopped(ray_before)
    finished = [p for p in (out / "runs").iterdir()
                if json.loads((p / "results.json").read_text())["status"] == "ok"]
    assert 1 <= len(finished) < 3
    second = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert second.stdout.count("done before") == len(finished)
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert len({r["point"] for r in rows}) == 3 and len(rows) == 6
    assert all(r["status"] == "ok" and r["sums_correct"] == "True" for r in rows)
    for point in {r["point"] for r in rows}:  # the same tolerance as the sweep on one machine
        assert_iterations_match_the_oracle(json.loads((out / "runs" / point / "results.json").read_text()),
                                           band=(0.8, 1.25))
    spans = sorted((p["started_unix_s"], p["finished_unix_s"]) for p in points_of(out).values())
    assert len(spans) == 3
    assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:])), spans  # one at a time
    assert not list(out.rglob("*.pcap"))
    assert_ray_stopped(ray_before)


MEGATRON_1024 = """
name: megatron-1024
seed: 1
fabric: {kind: sip-ring, hosts: 1024, gpu_bandwidth_gbps: 1000, latency_us: 1, wavelengths: 8}
workload:
  kind: model
  model: {name: megatron, global_batch: 1024, mp: 16, dp: 64, degree: 8, tau_us: 2000}
  iterations: 1
"""


def test_predicted_points_run_side_by_side(tmp_path):
    ray_before = ray_processes()
    # Megatron on 1,024 GPUs of SiP-Ring: about a second of the oracle's CPU per point, long
    # enough that two workers' points visibly overlap.
    scenario = tmp_path / "megatron.yaml"
    scenario.write_text(MEGATRON_1024)
    out = tmp_path / "sweep"
    done = subprocess.run([sys.executable, "-m", "testbed", "sweep", str(scenario), "--predict-only",
                           "--ray", "local", "--out", str(out), "--set", "fabric.gpu_bandwidth_gbps=400,800,1600,3200"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert len(rows) == 4 and all(r["status"] == "ok" and float(r["predicted_s"]) > 0 for r in rows)
    spans = sorted((p["started_unix_s"], p["finished_unix_s"], p["pid"]) for p in points_of(out).values())
    assert len({pid for _, _, pid in spans}) >= 2  # a worker per CPU, at least two
    assert any(b_start < a_end for (_, a_end, _), (b_start, _, _) in zip(spans, spans[1:])), spans  # in parallel
    assert_ray_stopped(ray_before)

"""The Python API (`import testbed`): what a notebook calls, checked against hand values and real
run and sweep directories (a loopback run, a prediction-only sweep); importing a part of the
package does not load it."""

from __future__ import annotations

import subprocess
import sys

import pytest

import testbed
from testbed.core.calibration import DEFAULT_CALIBRATION
from testbed.emulation.loopback import LoopbackBackend
from testbed.emulation.run import Runner
from testbed.model.errors import InputError
from testbed.planning.plan import prepare

from ..conftest import ROOT


def test_importing_the_oracle_does_not_load_the_api():
    code = "import sys, testbed.oracle; sys.exit('testbed.interface.api' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60).returncode == 0


def test_load_and_predict_give_the_closed_form():
    scenario = testbed.load_scenario(ROOT / "scenarios" / "quickstart.yaml", fabric__hosts=16)
    # Ring all-reduce of 100 MB on 16 GPUs at 100 Gb/s, alpha 5 us: 2(n-1)·alpha + 2(n-1)/n·M/B.
    expected = 30 * 5e-6 + 2 * 15 / 16 * 100e6 * 8 / 100e9
    prediction = testbed.predict(scenario)
    assert prediction.iteration_time_s == pytest.approx(expected, rel=1e-9)
    assert prediction.breakdown.communication_s == pytest.approx(expected, rel=1e-9)
    from_dict = testbed.load_scenario({"name": "d", "fabric": {"kind": "elect-flat", "hosts": 16,
                                                               "gpu_bandwidth_gbps": 100, "latency_us": 5},
                                       "workload": {"kind": "collective", "collective": "allreduce",
                                                    "bytes": 100_000_000}})
    assert testbed.predict(from_dict).iteration_time_s == pytest.approx(expected, rel=1e-9)
    with pytest.raises(InputError, match="hosts"):
        testbed.load_scenario(ROOT / "scenarios" / "quickstart.yaml", fabric__hosts=1)


def test_jobs_place_and_search():
    jobs = testbed.predict_each_job(testbed.load_scenario(ROOT / "scenarios" / "two-jobs-cluster.yaml"))
    assert [j.name for j in jobs] == ["a", "b"] and all(j.together_s > j.alone_s for j in jobs)
    model = {"name": "m", "fabric": {"kind": "elect-flat", "hosts": 8, "gpu_bandwidth_gbps": 100},
             "workload": {"kind": "model", "model": {"name": "resnet50", "global_batch": 64, "mp": 4, "dp": 2}}}
    plan = testbed.place(testbed.load_scenario(model))
    assert (plan.k, plan.l, plan.global_batch) == (4, 2, 64)
    top = testbed.search(testbed.load_scenario(model), top=2)
    assert len(top) == 2 and top[0].time_to_accuracy_s <= top[1].time_to_accuracy_s


def test_load_run_reads_a_real_run_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("TESTBED_REGISTRY_DIR", str(tmp_path / "registry"))
    scenario = testbed.load_scenario({
        "name": "api-run", "seed": 3,
        "fabric": {"kind": "elect-flat", "hosts": 4, "gpu_bandwidth_gbps": 100, "latency_us": 5},
        "workload": {"kind": "collective", "collective": "allreduce", "bytes": 400_000, "iterations": 2},
        "emulation": {"dilation": 200, "byte_scale": 1, "warmup_iterations": 1}})
    result = Runner(prepare(scenario, DEFAULT_CALIBRATION), tmp_path / "run", backend=LoopbackBackend()).execute()
    frame = testbed.load_run(tmp_path / "run")
    assert list(frame["iteration"]) == [0, 1] and list(frame["emulated_s"]) == result["iteration_times_s"]
    assert frame.attrs["results"]["sums_correct"] is True
    with pytest.raises(InputError, match="give a run directory"):
        testbed.load_run(tmp_path)


def test_load_sweep_reads_a_prediction_only_sweep(tmp_path):
    command = [sys.executable, "-m", "testbed", "sweep", str(ROOT / "scenarios" / "quickstart.yaml"),
               "--set", "fabric.gpu_bandwidth_gbps=100,400", "--predict-only", "--out", str(tmp_path / "s")]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    frame = testbed.load_sweep(tmp_path / "s")
    assert len(frame) > 0 and "fabric.gpu_bandwidth_gbps" in frame.columns


def test_the_example_study_runs():
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "api_study.py")], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "elect-flat" in done.stdout and "search #1" in done.stdout

"""Sweeps (points, resume, tidy CSV) with a stand-in executor, and reports of run and sweep
directories; the real sweep over Mininet is in tests/integration/test_sweep.py."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from testbed.interface.report import report
from testbed.interface.sweep import merge_sweeps, parse_sets, parse_shard, plan_points, run_sweep
from testbed.model.errors import InputError
from testbed.planning.scenario_file import load_scenario

from ..conftest import ROOT

QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


def fake_execute(calls, interrupt_at=None):
    def execute(scenario, run_dir):
        calls.append(run_dir.name)
        status = "interrupted" if len(calls) == interrupt_at else "ok"
        run_dir.mkdir(parents=True, exist_ok=True)
        result = {"name": scenario.name, "status": status, "iteration_times_s": [0.011, 0.012],
                  "emulated_over_predicted": [1.1, 1.2], "predicted_iteration_time_s": 0.01,
                  "fidelity": {"ok": True}, "sums_correct": True, "dilation": 10, "byte_scale": 0.1}
        (run_dir / "results.json").write_text(json.dumps(result))
        return result
    return execute


def test_sets_parse_to_typed_values_and_bad_ones_are_refused():
    assert parse_sets(["fabric.gpu_bandwidth_gbps=100,400", "fabric.kind=ina"]) == {
        "fabric.gpu_bandwidth_gbps": [100, 400], "fabric.kind": ["ina"]}
    for bad in (["fabric.hosts"], ["=1,2"], ["fabric.hosts=4", "fabric.hosts=8"], []):
        with pytest.raises(InputError):
            parse_sets(bad)


def test_an_invalid_point_is_named_before_anything_runs():
    with pytest.raises(InputError, match="p001-kind=sip-ring"):
        plan_points(load_scenario(QUICKSTART), {"fabric.kind": ["elect-flat", "sip-ring"]})


def test_sweep_resumes_without_rerunning_finished_points(tmp_path):
    scenario = load_scenario(QUICKSTART)
    sets = {"fabric.gpu_bandwidth_gbps": [100, 400, 1600], "fabric.kind": ["elect-flat", "elect-cluster"]}
    calls = []
    first = run_sweep(str(QUICKSTART), scenario, sets, tmp_path, fake_execute(calls, interrupt_at=3), lambda *a: None)
    assert first["interrupted"] and len(calls) == 3
    calls.clear()
    second = run_sweep(str(QUICKSTART), scenario, sets, tmp_path, fake_execute(calls), lambda *a: None)
    assert second == {"ran": 4, "skipped": 2, "failed": 0, "interrupted": False}
    assert calls[0].startswith("p002")  # the interrupted point runs again, the finished ones do not
    rows = list(csv.DictReader(open(tmp_path / "results.csv")))
    assert len(rows) == 12 and rows[0]["fabric.kind"] == "elect-flat" and rows[1]["iteration"] == "1"
    with pytest.raises(InputError, match="holds another sweep"):
        run_sweep(str(QUICKSTART), scenario, {"fabric.hosts": [4]}, tmp_path, fake_execute([]), lambda *a: None)
    path = report(tmp_path)
    assert (tmp_path / "scatter.png").stat().st_size > 1000 and "p005" in path.read_text()


def test_the_table_grows_by_each_finished_point_and_a_resumed_sweep_repeats_no_row(tmp_path):
    """Each finished point's rows are appended (not the whole table rebuilt per point); a resumed
    sweep first rewrites the table, so the interrupted point's stale rows do not stay beside its rerun."""
    scenario = load_scenario(QUICKSTART)
    sets = {"fabric.gpu_bandwidth_gbps": [100, 400, 1600, 3200]}
    seen = []

    def execute(scenario, run_dir, inner=fake_execute([], interrupt_at=2)):
        table = tmp_path / "results.csv"
        seen.append([(r["point"], r["iteration"]) for r in csv.DictReader(open(table))] if table.exists() else [])
        return inner(scenario, run_dir)

    run_sweep(str(QUICKSTART), scenario, sets, tmp_path, execute, lambda *a: None)
    assert seen == [[], [("p000-gpu_bandwidth_gbps=100", "0"), ("p000-gpu_bandwidth_gbps=100", "1")]]
    seen.clear()
    run_sweep(str(QUICKSTART), scenario, sets, tmp_path, lambda sc, rd: execute(sc, rd, fake_execute([])),
              lambda *a: None)
    # Before anything reruns, the interrupted sweep's table (p000, p001 interrupted); once p001 has
    # rerun, its rows once; then p002's.
    assert [len(snapshot) for snapshot in seen] == [4, 4, 6]
    assert all(len(set(snapshot)) == len(snapshot) for snapshot in seen)
    rows = [(r["point"], r["iteration"]) for r in csv.DictReader(open(tmp_path / "results.csv"))]
    assert len(rows) == 8 == len(set(rows)) and rows == sorted(rows)


def test_shards_split_the_points_and_merge_into_one_table(tmp_path):
    scenario = load_scenario(QUICKSTART)
    sets = {"fabric.gpu_bandwidth_gbps": [100, 400, 1600], "fabric.kind": ["elect-flat", "elect-cluster"]}
    ran = []
    for index in range(4):  # four jobs of an array, each with its own directory
        calls = []
        run_sweep(str(QUICKSTART), scenario, sets, tmp_path / f"shard{index}", fake_execute(calls),
                  lambda *a: None, shard=(index, 4))
        ran.append(calls)
        assert (tmp_path / f"shard{index}" / f"results-shard-{index}-of-4.csv").exists()
    # Points 0..5 dealt round-robin: 0 and 4, 1 and 5, 2, 3; together each exactly once.
    assert [[name[:4] for name in calls] for calls in ran] == [["p000", "p004"], ["p001", "p005"], ["p002"], ["p003"]]
    merged = merge_sweeps(tmp_path / "all", [tmp_path / f"shard{i}" for i in range(4)])
    assert merged == {"points": 6, "copied": 6, "missing": []}
    rows = list(csv.DictReader(open(tmp_path / "all" / "results.csv")))
    assert len(rows) == 12 and sorted({r["point"][:4] for r in rows}) == [f"p00{i}" for i in range(6)]
    partial = merge_sweeps(tmp_path / "part", [tmp_path / "shard0", tmp_path / "shard2"])
    assert partial["missing"] == [p.id for p, _ in plan_points(scenario, sets) if p.index in (1, 3, 5)]
    run_sweep(str(QUICKSTART), scenario, {"fabric.hosts": [4, 8]}, tmp_path / "other", fake_execute([]),
              lambda *a: None)
    with pytest.raises(InputError, match="holds another sweep"):
        merge_sweeps(tmp_path / "x", [tmp_path / "shard0", tmp_path / "other"])
    with pytest.raises(InputError, match="not a sweep directory"):
        merge_sweeps(tmp_path / "x", [tmp_path / "nothing"])
    for bad in ("4/4", "1", "a/b", "-1/2", "0/0"):
        with pytest.raises(InputError, match="--shard"):
            parse_shard(bad)
    assert parse_shard("3/8") == (3, 8)


def test_a_point_whose_machine_was_lost_runs_again_on_resume(tmp_path):
    scenario = load_scenario(QUICKSTART)
    sets = {"fabric.hosts": [4, 8]}
    run_sweep(str(QUICKSTART), scenario, sets, tmp_path, fake_execute([]), lambda *a: None)
    lost = next((tmp_path / "runs").iterdir())
    (lost / "results.json").write_text(json.dumps({"status": "failed", "error": "lost", "lost_node": "n1"}))
    calls = []
    counts = run_sweep(str(QUICKSTART), scenario, sets, tmp_path, fake_execute(calls), lambda *a: None)
    assert calls == [lost.name] and counts["skipped"] == 1


def test_predict_only_sweep_and_run_report_from_the_command_line(tmp_path):
    out = tmp_path / "sweep"
    done = subprocess.run([sys.executable, "-m", "testbed", "sweep", str(QUICKSTART), "--predict-only",
                           "--set", "fabric.hosts=4,8,16", "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert [float(r["predicted_s"]) for r in rows] == sorted(float(r["predicted_s"]) for r in rows)
    bad = subprocess.run([sys.executable, "-m", "testbed", "report", str(tmp_path / "nothing")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "not a directory" in bad.stderr


def test_run_report_draws_every_figure(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    result = {"name": "x", "status": "ok", "iteration_times_s": [0.01], "emulated_over_predicted": [1.0],
              "predicted_iteration_time_s": 0.01, "sums_correct": True, "dilation": 10, "byte_scale": 0.1,
              "breakdown": {"compute_s": 0.004, "communication_s": 0.006, "reconfiguration_s": 0.001},
              "predicted_breakdown": {"compute_s": 0.004, "communication_s": 0.006},
              "fidelity": {"ok": False, "monitors": {"link_rate": {"value": 0.5, "ok": False, "detail": "slow",
                                                                     "fix": "raise the dilation"}}}}
    (run / "results.json").write_text(json.dumps(result))
    (run / "schedule.json").write_text(json.dumps({"traffic_matrix_bytes": [[0, 5], [5, 0]]}))
    events = [{"t_s": 0.0, "duration_s": 0.004, "host": h, "kind": "compute"} for h in range(2)]
    events += [{"t_s": 0.004, "duration_s": 0.006, "host": h, "kind": "send"} for h in range(2)]
    events.append({"t_s": 0.001, "host": -1, "kind": "reconfiguration", "dark_start_s": 0.001, "restored_s": 0.002,
                   "changed": [[0, 1]]})
    (run / "events.jsonl").write_text("\n".join(json.dumps(e) for e in events))
    text = report(run).read_text()
    for figure in ("gantt.png", "breakdown.png", "traffic.png", "circuits.png"):
        assert (run / figure).exists() and figure in text
    assert "raise the dilation" in text and "NOT faithful" in text


def test_one_sweep_crosses_fabrics_with_each_kinds_own_fields(tmp_path):
    quickstart = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    sets = parse_sets(["fabric.kind=elect-flat,sip-ring", "sip-ring:fabric.wavelengths=4,8",
                       "fabric.gpu_bandwidth_gbps=100,400"])
    points = plan_points(quickstart, sets)
    # elect-flat has no wavelengths: its two points are not repeated for each wavelength count.
    assert [(s.fabric.kind, getattr(s.fabric, "wavelengths", None), s.fabric.gpu_bandwidth_gbps)
            for _, s in points] == [("elect-flat", None, 100), ("elect-flat", None, 400), ("sip-ring", 4, 100),
                                    ("sip-ring", 4, 400), ("sip-ring", 8, 100), ("sip-ring", 8, 400)]
    assert all("wavelengths" not in p.id for p, s in points if s.fabric.kind == "elect-flat")
    ring = load_scenario(ROOT / "scenarios" / "ring-allreduce.yaml")
    back = plan_points(ring, parse_sets(["fabric.kind=elect-flat"]))[0][1]  # the ring's own fields dropped
    assert back.fabric.kind == "elect-flat" and back.fabric.hosts == ring.fabric.hosts
    with pytest.raises(InputError, match="not a fabric kind"):
        plan_points(quickstart, parse_sets(["sip-rng:fabric.wavelengths=4"]))


def test_a_prediction_only_sweep_report_plots_predictions_and_judges_nothing(tmp_path):
    command = [sys.executable, "-m", "testbed", "sweep", str(ROOT / "scenarios" / "quickstart.yaml"), "--set",
               "fabric.kind=elect-flat,elect-cluster", "--set", "fabric.gpu_bandwidth_gbps=100,400", "--predict-only",
               "--out", str(tmp_path / "s")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report(tmp_path / "s")
    text = (tmp_path / "s" / "report.md").read_text()
    assert (tmp_path / "s" / "predicted.png").is_file() and not (tmp_path / "s" / "scatter.png").exists()
    assert "faithful" not in text and "emulated" not in text and "| 14.07 | ok |" in text

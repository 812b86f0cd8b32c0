"""Benchmark of placed models on fabrics that re-plan during a run (SiP-Ring every estimation
period, multi-shot SiP-OCS): each run's iterations against the one prediction (the schedule
simulated with the controller's re-plans) and, for comparison, against the same schedule simulated
on the plan it starts with (the yardstick before re-planning was simulated).

Run as root from the repository: `.venv/bin/python bench/replanning.py [--only NAME,...]`. Prints
a table and writes bench/results/replanning.json and replanning.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone

from bench_results import RESULTS, ratio_cells, run_in_tempdir, run_summary, save_rows

from testbed.fabrics.timing import dark_us
from testbed.oracle.retune_threshold import LAG_PERIODS, NEVER_US
from testbed.oracle.schedule_sim import simulate_schedule
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import parse_scenario

RING = {"kind": "sip-ring", "gpu_bandwidth_gbps": 400, "latency_us": 5, "wavelengths": 16, "wavelength_gbps": 25,
        "neighbors": 8, "reconfig_us": 25, "estimate_period_us": 100}
OCS = {"kind": "sip-ocs", "gpu_bandwidth_gbps": 100, "latency_us": 5, "ocs_switches": 3, "reconfig_us": 200,
       "multi_shot": True}
RESNET = {"name": "resnet50", "global_batch": 64, "mp": 4, "dp": 2}
TRANSFORMER = {"name": "transformer", "global_batch": 16, "mp": 4, "dp": 2, "degree": 3, "tau_us": 2000}
CASES = {
    "resnet-ring-8": (RING, 8, RESNET, 2),
    "transformer-ring-8": (RING, 8, TRANSFORMER, 2),
    "resnet-ring-16": (RING, 16, {**RESNET, "global_batch": 128, "dp": 4}, 1),
    "transformer-ring-16": (RING, 16, {**TRANSFORMER, "global_batch": 32, "dp": 4}, 1),
    "resnet-ocs-8": (OCS, 8, RESNET, 1),
    "resnet-ring-8-1ms": ({**RING, "estimate_period_us": 1000}, 8, RESNET, 2),
}


def scenario_for(name: str):
    fabric, hosts, model, iterations = CASES[name]
    return parse_scenario({"name": name, "seed": 1, "fabric": {**fabric, "hosts": hosts},
                           "workload": {"kind": "model", "model": model, "iterations": iterations},
                           "emulation": {"dilation": "auto"}}, name)


def bench(name: str) -> dict:
    started = time.monotonic()
    prepared = prepare(scenario_for(name))
    static_fabric = prepared.scenario.fabric.model_copy(update={"estimate_period_us": 1e12})
    static_s = simulate_schedule(prepared.schedule, static_fabric).iteration_time_s
    # The fastest and slowest outcome over the controller's delays, at the threshold the run gets.
    predicted_s = prepared.prediction.iteration_time_s
    spread_s = prepared.predicted_range_s or (predicted_s, predicted_s)
    result = run_in_tempdir(prepared)
    times = result["iteration_times_s"]
    breakdown = prepared.prediction.breakdown
    return {"scenario": name, "fabric": prepared.scenario.fabric.kind, "hosts": prepared.scenario.fabric.hosts,
            **run_summary(result), "predicted_s": predicted_s, "static_s": static_s,
            "predicted_range_s": list(spread_s), "threshold_us": prepared.scenario.fabric.retune_threshold_us,
            "dark_held_us": dark_us(prepared.scenario.fabric),
            "over_static": [t / static_s for t in times], "predicted_dark_s": breakdown.reconfiguration_s,
            "reconfigurations": result.get("reconfigurations"), "iterations": len(times),
            "error": result.get("error"), "wall_s": time.monotonic() - started,
            "measured": datetime.now(timezone.utc).isoformat(timespec="minutes")[:16]}


def earlier_rows() -> list[dict]:
    try:
        saved = json.loads((RESULTS / "replanning.json").read_text())
    except (OSError, ValueError):
        return []
    return [{"measured": saved["when"][:16], **row} for row in saved["rows"]]


def row_cells(row: dict) -> str:
    over_static = "/".join(f"{r:.2f}" for r in row["over_static"]) or "n/a"
    low, high = row.get("predicted_range_s") or (row["predicted_s"], row["predicted_s"])
    threshold = row.get("threshold_us")
    threshold_cell = "n/a" if threshold is None else "never" if threshold >= NEVER_US else f"{threshold:g}"
    if threshold is not None and threshold < NEVER_US and "dark_held_us" in row:
        threshold_cell += f" (dark {row['dark_held_us']:g})"
    return (f"{row['scenario']} | {row['hosts']} | {row['predicted_s'] * 1e3:.1f} | "
            f"{low * 1e3:.1f}-{high * 1e3:.1f} | {threshold_cell} | {row['static_s'] * 1e3:.1f} | "
            f"{ratio_cells(row)} | {over_static} | {row['predicted_dark_s'] * 1e3:.2f} | "
            f"{row['reconfigurations']} | {row['dilation']:.0f} | {row['wall_s']:.0f} | {row.get('measured', '')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", help="comma-separated case names: " + ", ".join(CASES))
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case {unknown[0]}; choose from {', '.join(CASES)}", file=sys.stderr)
        return 2
    measured = []
    for name in names:
        measured.append(bench(name))
        print(row_cells(measured[-1]), flush=True)
    # Cases not re-run this time keep their last figures, with the date they were measured on.
    rows = [*measured, *(r for r in earlier_rows() if r["scenario"] not in names)]
    rows.sort(key=lambda r: list(CASES).index(r["scenario"]) if r["scenario"] in CASES else len(CASES))
    header = ["Placed models on re-planning fabrics: emulated against the prediction that re-plans as the "
              "controller does (min / mean / max), and against the same schedule on its starting plan.", "",
              f"Predicted is the mean over a controller that retunes 0-{LAG_PERIODS[-1]:.0%} of a period after the "
              "period ends; the range is the fastest and slowest of those outcomes, at the rung the prediction "
              "picked (µs of expected gain a retune needs, and the dark time the controller holds; never = "
              "stands still).", "",
              "| case | GPUs | predicted ms | predicted range ms | threshold µs | starting plan ms | "
              "emulated/predicted | sums | faithful | emulated/starting plan | predicted dark ms | "
              "reconfigurations (run) | dilation | wall s | measured |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    return save_rows("replanning", rows, header, row_cells)


if __name__ == "__main__":
    raise SystemExit(main())

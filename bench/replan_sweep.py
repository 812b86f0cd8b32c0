"""Prediction-only sweep of reconfiguration delay and estimation period on SiP-Ring, like SiP-ML's
(§5): a placed model's schedule simulated with the controller's re-plans, its iteration time and
the dark time's share of it, against standing still (no re-plan). No root.

Run from the repository: `.venv/bin/python bench/replan_sweep.py [--models resnet50,transformer]
[--hosts N]`. Prints a table and writes bench/results/replan_sweep.json and replan_sweep.md.
"""

from __future__ import annotations

import argparse
import sys
import time

from bench_results import save_rows
from replan_tables import rung_cell

from testbed.oracle.retune_threshold import LAG_PERIODS, NEVER_US, with_retune_threshold
from testbed.oracle.schedule_sim import simulate_schedule
from testbed.planning.scenario_file import parse_scenario
from testbed.workloads.all_kinds import schedule_for

DELAYS_US = (0.0, 1.0, 10.0, 25.0, 100.0, 1_000.0, 5_000.0, 10_000.0)  # the paper's range, from 0
PERIODS_US = (100.0, 1_000.0)
MODELS = {"resnet50": {"name": "resnet50", "global_batch": 64, "mp": 4},
          "transformer": {"name": "transformer", "global_batch": 16, "mp": 4, "degree": 3, "tau_us": 2000}}


def sweep(model_name: str, hosts: int) -> list[dict]:
    model = {**MODELS[model_name], "dp": hosts // MODELS[model_name]["mp"]}
    fabric = {"kind": "sip-ring", "hosts": hosts, "gpu_bandwidth_gbps": 400, "latency_us": 5, "wavelengths": 16,
              "wavelength_gbps": 25, "neighbors": 8}
    scenario = parse_scenario({"name": f"{model_name}-{hosts}", "fabric": fabric,
                               "workload": {"kind": "model", "model": model, "iterations": 1}}, "sweep")
    schedule = schedule_for(scenario)
    still = scenario.fabric.model_copy(update={"estimate_period_us": 1e12})
    standing_s = simulate_schedule(schedule, still).iteration_time_s
    rows = []
    for period in PERIODS_US:
        for delay in DELAYS_US:
            started = time.monotonic()
            section = scenario.fabric.model_copy(update={"reconfig_us": delay, "estimate_period_us": period})
            retuning = with_retune_threshold(schedule, section)
            prediction, total = retuning.prediction, retuning.prediction.iteration_time_s
            threshold = getattr(retuning.fabric, "retune_threshold_us", None)
            rows.append({"status": "predicted", "correct": None,
                         "model": model_name, "hosts": hosts, "period_us": period, "reconfig_us": delay,
                         "iteration_s": total, "standing_still_s": standing_s, "range_s": list(retuning.spread_s),
                         "dark_share": prediction.breakdown.reconfiguration_s / total,
                         "retunes": prediction.formula.split("controller does: ")[-1].split(" re-plans")[0],
                         "threshold_us": None if threshold == NEVER_US else threshold,
                         "thresholds_tried": retuning.tried,
                         "seconds": time.monotonic() - started})
            print(f"{model_name}, period {period:g} µs, retune {delay:g} µs: {total * 1e3:.2f} ms", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS))
    parser.add_argument("--hosts", type=int, default=8)
    args = parser.parse_args()
    names = args.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown model {unknown[0]}; choose from {', '.join(MODELS)}", file=sys.stderr)
        return 2
    rows = [row for name in names for row in sweep(name, args.hosts)]
    header = [f"SiP-Ring (16 × 25 Gb/s, reach 8), placed models on {args.hosts} GPUs: predicted iteration "
              f"with the controller's re-plans at the rung the prediction picks (the dark time the controller "
              f"holds and the gain a retune needs, at or above the retune time; never: stands still), the mean "
              f"over a controller that retunes 0-{LAG_PERIODS[-1]:.0%} of a period after the period ends, the "
              f"fastest and slowest of those outcomes, and the iteration over standing still (no re-plan).", "",
              "| model | period µs | retune µs | iteration ms | range ms | over standing still | dark share | "
              "rung µs | retunes of re-plans | simulated in s |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    save_rows("replan_sweep", rows, header, lambda r: (  # its exit code judges emulated runs: none here
        f"{r['model']} | {r['period_us']:g} | {r['reconfig_us']:g} | {r['iteration_s'] * 1e3:.2f} | "
        f"{r['range_s'][0] * 1e3:.2f}-{r['range_s'][1] * 1e3:.2f} | "
        f"{r['iteration_s'] / r['standing_still_s']:.3f} | {r['dark_share']:.1%} | "
        f"{rung_cell(r)} | {r['retunes']} | "
        f"{r['seconds']:.1f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

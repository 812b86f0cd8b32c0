"""Benchmark: scenarios/llm-dense.yaml (tp × pp × dp with 1F1B on 8 emulated GPUs) on Elect-Flat,
Elect-Cluster, SiP-OCS (one plan, and multi-shot) and re-planning SiP-Ring, and scenarios/llm-ina.yaml
(tp × dp) on an ina fabric with its gradients summed by the node and by a ring: emulated/predicted
per iteration, sums, fidelity, wall time.

Run as root from the repository: `.venv/bin/python bench/llm_dense.py [--only elect-flat,...]`.
Prints each row and writes bench/results/llm_dense.json (and .md) beside this script.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timezone
from pathlib import Path

from bench_results import RESULTS, cell, ratio_cells, run_in_tempdir, run_summary, save_rows

from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import plan, prepare
from testbed.planning.scenario_file import load_scenario

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
SCENARIO = SCENARIOS / "llm-dense.yaml"
# Each fabric at 400 Gb/s per GPU: Elect-Cluster's servers of 4 with a 400 Gb/s uplink each,
# SiP-OCS with 4 switches planned once from the iteration's traffic, and re-planned between phases
# (multi-shot), SiP-Ring with 4 wavelengths of 100 Gb/s re-planned every 100 µs.
FABRICS = {
    "elect-flat": {},
    "elect-cluster": {"fabric.kind": "elect-cluster", "fabric.gpus_per_server": 4, "fabric.server_uplink_gbps": 400},
    "sip-ocs": {"fabric.kind": "sip-ocs", "fabric.ocs_switches": 4, "fabric.reconfig_us": 200},
    "sip-ocs-multi-shot": {"fabric.kind": "sip-ocs", "fabric.ocs_switches": 4, "fabric.reconfig_us": 200,
                           "fabric.multi_shot": True},
    "sip-ring": {"fabric.kind": "sip-ring", "fabric.wavelengths": 4, "fabric.wavelength_gbps": 100,
                 "fabric.reconfig_us": 25, "fabric.estimate_period_us": 100},
    # scenarios/llm-ina.yaml (tp 2 × dp 4): the gradients through the aggregation node, and by a ring
    "ina": {},
    "ina-ring": {"workload.parallel.dp_algorithm": "ring"},
}


def run_one(kind: str) -> dict:
    path = SCENARIOS / "llm-ina.yaml" if kind.startswith("ina") else SCENARIO
    scenario = apply_overrides(load_scenario(path), FABRICS[kind])
    started = time.monotonic()
    found = plan(scenario)
    result = run_in_tempdir(prepare(scenario))
    return {"fabric": kind, "predicted_ms": found.prediction.iteration_time_s * 1e3,
            "breakdown": found.prediction.breakdown.describe(), **run_summary(result),
            "error": result.get("error"), "wall_s": time.monotonic() - started}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", help="comma-separated fabric kinds (default: all of them)")
    args = parser.parse_args()
    kinds = args.only.split(",") if args.only else list(FABRICS)
    rows = []
    for kind in kinds:
        row = {**run_one(kind), "measured": datetime.now(timezone.utc).isoformat(timespec="minutes")[:16]}
        print(row, flush=True)
        rows.append(row)
    # fabrics not re-run this time keep their last rows (with the date they were measured on)
    saved = RESULTS / "llm_dense.json"
    kept = [r for r in json.loads(saved.read_text())["rows"] if r["fabric"] not in kinds] if saved.exists() else []
    rows = sorted(kept + rows, key=lambda r: list(FABRICS).index(r["fabric"]))
    header = ["# scenarios/llm-dense.yaml on every fabric (8 emulated GPUs, tp 2 × pp 2 × dp 2, 1F1B)", "",
              "The ina rows are scenarios/llm-ina.yaml (tp 2 × dp 4): gradients summed by the aggregation node "
              "(ina) and by a ring through it (ina-ring).", "",
              "Multi-shot SiP-OCS re-plans from the bytes each period measured: its run retuned twice an "
              "iteration where the prediction's controller retuned once (0.4 against 0.2 ms dark, and circuits "
              "moved to pairs the next phase did not use).", "",
              "| fabric | predicted (ms) | emulated/predicted min / mean / max | sums | faithful | flagged | "
              "dilation | wall (s) | predicted breakdown | measured |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    return save_rows("llm_dense", rows, header, lambda r: (
        f"{r['fabric']} | {r['predicted_ms']:.3f} | {ratio_cells(r)} | {r['flagged'] or '-'} | "
        f"{cell(r['dilation'], 0)} | {r['wall_s']:.0f} | {r['breakdown']} | {r['measured']}"))


if __name__ == "__main__":
    raise SystemExit(main())

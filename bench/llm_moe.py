"""Benchmark: scenarios/llm-moe.yaml (a shortened Mixtral, pp 2 × dp 4 with its experts over ep 4,
8 emulated GPUs) on Elect-Flat, Elect-Cluster, multi-shot SiP-OCS and a re-planning SiP-Ring, with
even and skewed routing: emulated/predicted per iteration, sums, fidelity, wall time.

Run as root from the repository: `.venv/bin/python bench/llm_moe.py [--only elect-flat,...]`.
Prints each row and writes bench/results/llm_moe.json (and .md) beside this script.
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

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "llm-moe.yaml"
SKEW = {"workload.model.routing_skew": 1.0}  # Zipf: the r-th most popular expert ∝ 1/r
FLAT = {"fabric.kind": "elect-flat"}
# Each fabric at 400 Gb/s per GPU, as bench/llm_dense.py sets them (the scenario ships on SiP-Ring).
FABRICS = {
    "elect-flat": FLAT,
    "elect-flat-skewed": {**FLAT, **SKEW},
    "elect-cluster": {"fabric.kind": "elect-cluster", "fabric.gpus_per_server": 4, "fabric.server_uplink_gbps": 400},
    "sip-ocs-multi-shot": {"fabric.kind": "sip-ocs", "fabric.ocs_switches": 4, "fabric.reconfig_us": 200,
                           "fabric.multi_shot": True},
    "sip-ring": {},
    "sip-ring-skewed": SKEW,
}


def run_one(kind: str) -> dict:
    scenario = apply_overrides(load_scenario(SCENARIO), FABRICS[kind])
    started = time.monotonic()
    found = plan(scenario)
    result = run_in_tempdir(prepare(scenario))
    return {"fabric": kind, "predicted_ms": found.prediction.iteration_time_s * 1e3,
            "breakdown": found.prediction.breakdown.describe(), **run_summary(result),
            "error": result.get("error"), "wall_s": time.monotonic() - started}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", help="comma-separated rows (default: all of them)")
    args = parser.parse_args()
    kinds = args.only.split(",") if args.only else list(FABRICS)
    rows = []
    for kind in kinds:
        row = {**run_one(kind), "measured": datetime.now(timezone.utc).isoformat(timespec="minutes")[:16]}
        print(row, flush=True)
        rows.append(row)
    saved = RESULTS / "llm_moe.json"
    kept = [r for r in json.loads(saved.read_text())["rows"] if r["fabric"] not in kinds] if saved.exists() else []
    rows = sorted(kept + rows, key=lambda r: list(FABRICS).index(r["fabric"]))
    header = ["# scenarios/llm-moe.yaml on every fabric (8 emulated GPUs, pp 2 × dp 4, ep 4, 1F1B)", "",
              "Rows ending in -skewed route by a Zipf law of exponent 1 (model.routing_skew: 1.0).", "",
              "| fabric | predicted (ms) | emulated/predicted min / mean / max | sums | faithful | flagged | "
              "dilation | wall (s) | predicted breakdown | measured |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    return save_rows("llm_moe", rows, header, lambda r: (
        f"{r['fabric']} | {r['predicted_ms']:.3f} | {ratio_cells(r)} | {r['flagged'] or '-'} | "
        f"{cell(r['dilation'], 0)} | {r['wall_s']:.0f} | {r['breakdown']} | {r['measured']}"))


if __name__ == "__main__":
    raise SystemExit(main())

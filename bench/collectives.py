"""Benchmark: emulated/predicted time of every collective at N = 4, 8 and 16 on Elect-Flat.

Run as root: `.venv/bin/python bench/collectives.py`. Prints a table and writes
bench/results/collectives.{json,md}. Target (issue): every ratio within 0.85-1.15.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from bench_results import cell, ratio_cells, run_in_tempdir, save_rows

from hosts.ops import SERVICE_ALGORITHMS
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import parse_scenario
from testbed.shared.collective_plans import SUPPORTED_COLLECTIVES

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", default="4,8,16")
    parser.add_argument("--bytes", type=int, default=100_000_000)
    args = parser.parse_args()
    rows = []
    for hosts in [int(h) for h in args.hosts.split(",")]:
        for op, algorithm in sorted(SUPPORTED_COLLECTIVES):
            if algorithm in SERVICE_ALGORITHMS or algorithm == "ina":
                continue  # they need CPU machines or an aggregation node: bench/byteps.py, bench/ina.py
            scenario = parse_scenario({
                "name": f"bench-{op}-{algorithm}-{hosts}", "seed": 3,
                "fabric": {"kind": "elect-flat", "hosts": hosts, "gpu_bandwidth_gbps": 100, "latency_us": 5},
                "workload": {"kind": "collective", "collective": op, "algorithm": algorithm, "bytes": args.bytes,
                             "iterations": 3},
            })
            started = time.monotonic()
            result = run_in_tempdir(prepare(scenario))
            ratios = result["emulated_over_predicted"]
            rows.append({
                "hosts": hosts, "collective": op, "algorithm": algorithm, "status": result["status"],
                "correct": result["sums_correct"], "faithful": result["fidelity"]["ok"],
                "ratio_mean": statistics.fmean(ratios) if ratios else None,
                "ratio_min": min(ratios) if ratios else None, "ratio_max": max(ratios) if ratios else None,
                "predicted_ms": result["predicted_iteration_time_s"] * 1e3, "dilation": result["dilation"],
                "link_rate": result["fidelity"]["monitors"]["link_rate"]["value"],
                "wall_s": time.monotonic() - started,
            })
            print(json.dumps(rows[-1]), flush=True)
    header = ["| N | collective | algorithm | emulated/predicted (min / mean / max) | result | faithful | link rate |",
              "| ---: | --- | --- | :---: | :---: | :---: | ---: |"]
    return save_rows("collectives", rows, header, lambda r: f"{r['hosts']} | {r['collective']} | {r['algorithm']} | "
                     f"{ratio_cells(r)} | {cell(r['link_rate'])}")

if __name__ == "__main__":
    raise SystemExit(main())

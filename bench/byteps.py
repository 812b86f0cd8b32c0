"""Benchmark: BytePS at n = 4 GPU machines with k = 0, 2 and 4 CPU machines, the classic PS with
the same CPU machines, and BytePS on Elect-Cluster: emulated against predicted, beside the
optimal time of BytePS's load split (every machine moving 2n(n-1)/(n²+kn-2k)·M at B).

Run as root: `.venv/bin/python bench/byteps.py`. Prints a table and writes
bench/results/byteps.{json,md}. Target (issue): every ratio within 0.85-1.15.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench_results import cell, ratio_cells, run_in_tempdir, save_rows

from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
B_BPS = 100e9

CASES = [  # (label, scenario file, overrides)
    ("BytePS n=4 k=0", "byteps.yaml", {"fabric.cpu_servers": 0}),
    ("BytePS n=4 k=2", "byteps.yaml", {}),
    ("BytePS n=4 k=2, 32 MB", "byteps.yaml", {"workload.bytes": 32_000_000}),
    ("BytePS n=4 k=4", "byteps.yaml", {"fabric.cpu_servers": 4}),
    ("classic PS n=4 k=2", "byteps.yaml", {"workload.algorithm": "ps"}),
    ("classic PS n=4 k=4", "byteps.yaml", {"workload.algorithm": "ps", "fabric.cpu_servers": 4}),
    ("ring all-reduce n=4", "byteps.yaml", {"fabric.cpu_servers": 0, "workload.algorithm": "ring"}),
    ("BytePS Elect-Cluster 2x4", "cluster-byteps.yaml", {}),
]


def _three(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def optimal_ms(scenario) -> float | None:
    """The load split's figure for a flat fabric (no pipeline tail, no alpha)."""
    f, w = scenario.fabric, scenario.workload
    if f.kind == "elect-cluster":
        return None
    n, k = f.hosts, f.cpu_servers if f.kind == "ps" else 0
    if w.algorithm == "ps":
        load = max(1.0, n / k)
    else:
        load = 2 * n * (n - 1) / (n * n + k * n - 2 * k)
    return load * w.bytes * 8 / B_BPS * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for label, name, overrides in CASES:
        scenario = apply_overrides(load_scenario(ROOT / "scenarios" / name),
                                   {"workload.iterations": args.iterations, **overrides})
        result = run_in_tempdir(prepare(scenario))
        ratios = result["emulated_over_predicted"]
        rows.append({
            "case": label, "status": result["status"], "correct": result["sums_correct"],
            "faithful": result["fidelity"]["ok"],
            "emulated_ms": statistics.fmean(result["iteration_times_s"]) * 1e3 if ratios else None,
            "predicted_ms": result["predicted_iteration_time_s"] * 1e3, "optimal_ms": optimal_ms(scenario),
            "ratio_min": min(ratios, default=None), "ratio_mean": statistics.fmean(ratios) if ratios else None,
            "ratio_max": max(ratios, default=None), "dilation": result["dilation"],
        })
        optimum = rows[-1]["optimal_ms"]
        rows[-1]["over_optimum"] = rows[-1]["emulated_ms"] / optimum if optimum and rows[-1]["emulated_ms"] else None
        print(json.dumps(rows[-1]), flush=True)
    header = ["| case | emulated (ms) | predicted (ms) | load-split optimum (ms) | emulated/optimum "
              "| emulated/predicted (min / mean / max) "
              "| result | faithful |", "| --- | ---: | ---: | ---: | ---: | :---: | :---: | :---: |"]
    return save_rows("byteps", rows, header, lambda r: f"{r['case']} | {cell(r['emulated_ms'])} | "
                     f"{cell(r['predicted_ms'])} | {cell(r['optimal_ms'])} | {_three(r.get('over_optimum'))} | "
                     f"{ratio_cells(r)}")

if __name__ == "__main__":
    raise SystemExit(main())

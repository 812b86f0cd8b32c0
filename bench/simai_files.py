"""Benchmark: AICB's own workload files (tests/data/aicb) replayed with real packets as SimAI reads
them: the all-reduce micro-benchmark (4 KiB to 1 GiB) and GPT-3 175B (tp 8) on 16 GPUs of
Elect-Flat at 400 Gb/s; emulated/predicted, sums, fidelity, wall time.

Run as root from the repository: `.venv/bin/python bench/simai_files.py`. Prints each row and writes
bench/results/simai_files.json (and .md) beside this script.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

from bench_results import cell, ratio_cells, run_in_tempdir, run_summary, save_rows

from testbed.planning.plan import plan, prepare
from testbed.planning.scenario_file import parse_scenario

AICB = Path(__file__).resolve().parent.parent / "tests" / "data" / "aicb"
FILES = ("all_reduce.txt", "G175B-M1-C03_GPT175B_megatron_tp8_pp1_mbs1_A100.txt")


def run_one(name: str) -> dict:
    scenario = parse_scenario({"name": Path(name).stem, "fabric": {"kind": "elect-flat", "hosts": 16,
                                                                    "gpu_bandwidth_gbps": 400, "latency_us": 2},
                               "workload": {"kind": "simai", "path": str(AICB / name), "iterations": 2}}, "bench")
    started = time.monotonic()
    found = plan(scenario)
    result = run_in_tempdir(prepare(scenario))
    return {"file": name, "predicted_ms": found.prediction.iteration_time_s * 1e3, **run_summary(result),
            "error": result.get("error"), "wall_s": time.monotonic() - started,
            "measured": datetime.now(timezone.utc).isoformat(timespec="minutes")[:16]}


def main() -> int:
    rows = []
    for name in FILES:
        rows.append(run_one(name))
        print(rows[-1], flush=True)
    header = ["# AICB's workload files on 16 GPUs of Elect-Flat (400 Gb/s, 2 µs)", "",
              "| file | predicted (ms) | emulated/predicted min / mean / max | sums | faithful | flagged | "
              "dilation | wall (s) | measured |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    return save_rows("simai_files", rows, header, lambda r: (
        f"{r['file']} | {r['predicted_ms']:.3f} | {ratio_cells(r)} | {r['flagged'] or '-'} | "
        f"{cell(r['dilation'], 0)} | {r['wall_s']:.0f} | {r['measured']}"))


if __name__ == "__main__":
    raise SystemExit(main())

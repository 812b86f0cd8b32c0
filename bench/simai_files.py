"""Benchmark: AICB's own workload files (tests/data/aicb) replayed with real packets as SimAI reads
them: the all-reduce micro-benchmark (4 KiB to 1 GiB) and GPT-3 175B (tp 8) on 16 GPUs of
Elect-Flat at 400 Gb/s; emulated/predicted, sums, fidelity, wall time.

Run as root from the repository: `.venv/bin/python bench/simai_files.py`. Prints each row and writes
bench/results/simai_files.json (and .md) beside this script.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timezone
from pathlib import Path

from bench_results import RESULTS, cell, ratio_cells, run_in_tempdir, run_summary, save_rows

from testbed.planning.plan import plan, prepare
from testbed.planning.scenario_file import parse_scenario

AICB = Path(__file__).resolve().parent.parent / "tests" / "data" / "aicb"
FILES = ("all_reduce.txt", "G175B-M1-C03_GPT175B_megatron_tp8_pp1_mbs1_A100.txt")
# GPT-3's tensor-parallel all-reduces run beside its data-parallel reduce-scatter: at the dilation
# sized for its load alone (95) the switch datapath dropped 0.05% of the packets.
DILATION = {"G175B-M1-C03_GPT175B_megatron_tp8_pp1_mbs1_A100.txt": 300}


def run_one(name: str) -> dict:
    scenario = parse_scenario({"name": Path(name).stem, "fabric": {"kind": "elect-flat", "hosts": 16,
                                                                    "gpu_bandwidth_gbps": 400, "latency_us": 2},
                               "workload": {"kind": "simai", "path": str(AICB / name), "iterations": 2},
                               **({"emulation": {"dilation": DILATION[name]}} if name in DILATION else {})}, "bench")
    started = time.monotonic()
    found = plan(scenario)
    result = run_in_tempdir(prepare(scenario))
    return {"file": name, "dilation_set": DILATION.get(name), "predicted_ms": found.prediction.iteration_time_s * 1e3,
            **run_summary(result),
            "error": result.get("error"), "wall_s": time.monotonic() - started,
            "measured": datetime.now(timezone.utc).isoformat(timespec="minutes")[:16]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", help="comma-separated file names (default: both)")
    args = parser.parse_args()
    rows = []
    saved = RESULTS / "simai_files.json"
    names = args.only.split(",") if args.only else list(FILES)
    for name in names:
        rows.append(run_one(name))
        print(rows[-1], flush=True)
    # files not re-run this time keep their last rows
    kept = [r for r in json.loads(saved.read_text())["rows"] if r["file"] not in names] if saved.exists() else []
    rows = sorted(kept + rows, key=lambda r: FILES.index(r["file"]))
    header = ["# AICB's workload files on 16 GPUs of Elect-Flat (400 Gb/s, 2 µs)", "",
              "| file | predicted (ms) | emulated/predicted min / mean / max | sums | faithful | flagged | "
              "dilation | wall (s) | measured |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    return save_rows("simai_files", rows, header, lambda r: (
        f"{r['file']} | {r['predicted_ms']:.3f} | {ratio_cells(r)} | {r['flagged'] or '-'} | "
        f"{cell(r['dilation'], 0)} | {r['wall_s']:.0f} | {r['measured']}"))


if __name__ == "__main__":
    raise SystemExit(main())

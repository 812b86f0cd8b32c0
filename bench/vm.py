"""Benchmark: this machine beside the local VM of `bash scripts/setup.sh vm` (kernel datapath and
netem): calibrated capacity and timer error, the quickstart and one optical scenario with
emulated/predicted, their monitors and wall times, on both, in one run.

Run as root: `.venv/bin/python bench/vm.py`. Prints a table and writes bench/results/vm.{json,md}.
With --here it measures only the machine it runs on and prints one JSON line (what it runs
inside the VM).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from bench_results import cell, ratio_cells, run_in_tempdir, run_summary, save_rows

from testbed.core.calibration import load_calibration
from testbed.emulation.platform import inspect_platform
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = ["quickstart.yaml", "ocs-allreduce.yaml"]


def measure_here(where: str) -> list[dict]:
    """One row per case on this machine, each with the machine's platform and calibration."""
    platform, calibration = inspect_platform(), load_calibration()
    rows = []
    for name in CASES:
        scenario = load_scenario(ROOT / "scenarios" / name)
        started = time.monotonic()
        result = run_in_tempdir(prepare(scenario))
        rows.append({
            "where": where, "case": name.removesuffix(".yaml"), "datapath": platform.datapath,
            "netem": platform.netem, "capacity_mbps": calibration.capacity_bps / 1e6,
            "agent_capacity_mbps": (calibration.agent_capacity_bps or 0) / 1e6,
            "timer_p99_us": calibration.timer_error_s * 1e6, **run_summary(result),
            "wall_s": time.monotonic() - started,
        })
    return rows


def measure_in_vm() -> list[dict]:
    """The same inside the VM: its last line of output is the rows as JSON."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "vm.sh"), "exec", ".venv/bin/python bench/vm.py --here"],
                          capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
    if done.returncode != 0 or not lines:
        sys.stderr.write(done.stdout[-2000:] + done.stderr[-2000:])
        raise SystemExit(f"the VM run failed (exit {done.returncode})")
    return json.loads(lines[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--here", action="store_true", help="measure this machine only and print the rows as JSON")
    args = parser.parse_args()
    if args.here:
        print(json.dumps(measure_here("VM (kernel datapath)")), flush=True)
        return 0
    started = time.monotonic()
    rows = measure_here("host")
    rows += measure_in_vm()
    print(f"both in {time.monotonic() - started:.0f} s", flush=True)
    header = ["| where | case | datapath | netem | capacity (Mb/s) | timer p99 (µs) | dilation "
              "| emulated/predicted (min / mean / max) | result | faithful | flagged | wall (s) |",
              "| --- | --- | --- | :---: | ---: | ---: | ---: | :---: | :---: | :---: | --- | ---: |"]
    return save_rows("vm", rows, header, lambda r: (
        f"{r['where']} | {r['case']} | {r['datapath']} | {'yes' if r['netem'] else 'no'} | "
        f"{r['capacity_mbps']:.0f} | {r['timer_p99_us']:.0f} | {cell(r['dilation'])} | {ratio_cells(r)} | "
        f"{r['flagged'] or '—'} | {r['wall_s']:.0f}"))


if __name__ == "__main__":
    raise SystemExit(main())

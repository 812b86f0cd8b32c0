"""Benchmark: the quickstart scenario at 4, 8 and 16 hosts; emulated/predicted and wall time of each.

Run as root from the repository: `.venv/bin/python bench/quickstart_scale.py`. Prints a table and
writes bench/results/quickstart_scale.json (and .md) beside this script.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

from bench_results import run_in_tempdir

from testbed.core.calibration import load_calibration
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", default="4,8,16")
    parser.add_argument("--scenario", default=str(HERE.parent / "scenarios" / "quickstart.yaml"))
    args = parser.parse_args()
    base = load_scenario(args.scenario)
    rows = []
    for hosts in [int(h) for h in args.hosts.split(",")]:
        scenario = apply_overrides(base, {"fabric.hosts": hosts, "name": f"{base.name}-{hosts}"})
        started = time.monotonic()
        result = run_in_tempdir(prepare(scenario))
        wall_s = time.monotonic() - started
        ratios = result["emulated_over_predicted"]
        rows.append({
            "hosts": hosts,
            "status": result["status"],
            "sums_correct": result["sums_correct"],
            "faithful": result["fidelity"]["ok"],
            "unfaithful_monitors": {name: m["detail"] for name, m in result["fidelity"]["monitors"].items()
                                    if not m["ok"]},
            "ratio_min": min(ratios) if ratios else None,
            "ratio_mean": statistics.fmean(ratios) if ratios else None,
            "ratio_max": max(ratios) if ratios else None,
            "predicted_ms": result["predicted_iteration_time_s"] * 1e3,
            "dilation": result["dilation"],
            "host_rate_mbps": result["host_rate_bps"] / 1e6,
            "wall_s": wall_s,
        })
        print(json.dumps(rows[-1]))
    calibration = load_calibration()
    report = {
        "benchmark": "quickstart_scale",
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cores": __import__("os").cpu_count(), "python": platform.python_version(),
                    "capacity_mbps": calibration.capacity_bps / 1e6, "timer_error_us": calibration.timer_error_s * 1e6},
        "rows": rows,
    }
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "quickstart_scale.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = ["| hosts | emulated/predicted (min / mean / max) | sums | faithful | dilation | Mb/s per host "
             "| wall (s) |",
             "| ---: | :---: | :---: | :---: | ---: | ---: | ---: |"]
    for r in rows:
        ratio = "n/a" if r["ratio_min"] is None else \
            f"{r['ratio_min']:.3f} / {r['ratio_mean']:.3f} / {r['ratio_max']:.3f}"
        lines.append(f"| {r['hosts']} | {ratio} | {'ok' if r['sums_correct'] else 'WRONG'} | "
                     f"{'yes' if r['faithful'] else 'no'} | {r['dilation']:.1f} | {r['host_rate_mbps']:.1f} | "
                     f"{r['wall_s']:.1f} |")
    table = "\n".join(lines)
    (out_dir / "quickstart_scale.md").write_text(table + "\n")
    print(table)
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: every shipped scenario run once as shipped; emulated/predicted, sums, fidelity, wall time.

The yardstick of a change to the oracle or the placer: each scenario's emulated iteration against
what the oracle predicts for it. `overdriven.yaml` is meant to be flagged (it asks for far more
than the machine forwards) and is run with `dilation: auto` instead, as its comment suggests.

Run as root from the repository: `.venv/bin/python bench/scenarios.py [--only a,b]`. Prints a table
and writes bench/results/scenarios.json (and .md) beside this script.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timezone
from pathlib import Path

from bench_results import RESULTS, ratio_cells, run_in_tempdir, run_summary, save_rows

from testbed.model.errors import InputError
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE.parent / "scenarios"
OVERRIDES = {"overdriven": {"emulation.dilation": "auto", "emulation.byte_scale": "auto"}}


def run_one(path: Path) -> dict:
    scenario = load_scenario(path)
    overrides = OVERRIDES.get(scenario.name, {})
    scenario = apply_overrides(scenario, overrides) if overrides else scenario
    started = time.monotonic()
    try:
        prepared = prepare(scenario)
    except InputError as error:  # a scenario for `testbed place`/`predict` only
        return {"scenario": scenario.name, "status": "not emulated", "error": str(error)}
    result = run_in_tempdir(prepared)
    return {"scenario": scenario.name, "fabric": scenario.fabric.kind, "hosts": scenario.fabric.hosts,
            "workload": scenario.workload.kind, "overrides": overrides, **run_summary(result),
            "error": result.get("error"), "wall_s": time.monotonic() - started}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", help="comma-separated scenario names (default: every shipped scenario)")
    parser.add_argument("--name", default="scenarios", help="results file name in bench/results")
    args = parser.parse_args()
    paths = sorted(SCENARIOS.glob("*.yaml"))
    if args.only:
        wanted = set(args.only.split(","))
        paths = [p for p in paths if p.stem in wanted]
    rows = []
    for path in paths:
        row = {**run_one(path), "measured": datetime.now(timezone.utc).isoformat(timespec="minutes")[:16]}
        print(row, flush=True)
        rows.append(row)
    # Scenarios not re-run this time keep their last figures, with the date they were measured on.
    names = {r["scenario"] for r in rows}
    kept = [r for r in earlier_rows(args.name) if r["scenario"] not in names] if args.only else []
    emulated = sorted([r for r in rows if r["status"] != "not emulated"] + kept, key=lambda r: r["scenario"])
    save_table(args.name, emulated)
    skipped = [r["scenario"] for r in rows if r["status"] == "not emulated"]
    if skipped:
        print(f"not emulated (place/predict only): {', '.join(skipped)}")
    return 0 if all(r["status"] == "ok" and r["correct"] for r in emulated) else 1


def earlier_rows(name: str) -> list[dict]:
    try:
        saved = json.loads((RESULTS / f"{name}.json").read_text())
    except (OSError, ValueError):
        return []
    return [{"measured": saved["when"][:16], **row} for row in saved["rows"]]


def save_table(name: str, rows: list[dict]) -> int:
    header = ["| scenario | fabric | GPUs | emulated/predicted (min / mean / max) | sums | faithful | dilation "
              "| wall (s) | measured |",
              "| --- | --- | ---: | :---: | :---: | :---: | ---: | ---: | --- |"]
    return save_rows(name, rows, header, lambda r: (
        f"{r['scenario']} | {r['fabric']} | {r['hosts']} | {ratio_cells(r)}"
        f"{' (' + r['flagged'] + ')' if r['flagged'] else ''} | {r['dilation']:.0f} | {r['wall_s']:.0f} | "
        f"{r.get('measured', '')}"))


if __name__ == "__main__":
    raise SystemExit(main())

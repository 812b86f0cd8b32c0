"""Shared by the benchmarks: run a scenario in a throwaway directory, write rows to
bench/results/<name>.json and a Markdown table to <name>.md, print the table, and format the cells
every table has."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from testbed.model.scenario import Scenario
    from testbed.workloads.sizing import Prepared

RESULTS = Path(__file__).resolve().parent / "results"


def run_in_tempdir(prepared: "Prepared") -> dict:
    """One emulated run in a directory removed afterwards; what it measured (results.json)."""
    from testbed.emulation.run import Runner  # the placer's benches import this module without root

    with tempfile.TemporaryDirectory(prefix="testbed-bench-") as work:
        return Runner(prepared, Path(work) / "run").execute()


def cell(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def flagged_monitors(result: dict) -> str:
    """The fidelity monitors that called a run not faithful, with their values."""
    monitors = result.get("fidelity", {}).get("monitors", {})
    return ", ".join(f"{name} {m['value']:.3g}" if isinstance(m.get("value"), (int, float)) else name
                     for name, m in monitors.items() if not m.get("ok", True))


def run_summary(result: dict) -> dict:
    """What every bench row says of a run: its status, exact sums, fidelity (and what it flagged),
    dilation, and emulated/predicted as min / mean / max."""
    ratios = result["emulated_over_predicted"]
    return {"status": result["status"], "correct": result["sums_correct"], "faithful": result["fidelity"]["ok"],
            "flagged": flagged_monitors(result), "dilation": result["dilation"],
            "ratio_min": min(ratios, default=None), "ratio_mean": sum(ratios) / len(ratios) if ratios else None,
            "ratio_max": max(ratios, default=None)}


def ratio_cells(row: dict) -> str:
    """Emulated/predicted as min / mean / max, then whether the sums were exact and the run faithful."""
    return (f"{cell(row['ratio_min'])} / {cell(row['ratio_mean'])} / {cell(row['ratio_max'])} | "
            f"{'exact' if row['correct'] else 'WRONG'} | {'yes' if row['faithful'] else 'no'}")


def save_rows(name: str, rows: list[dict], header: list[str], row_cells: Callable[[dict], str]) -> int:
    """Write and print; the exit code says whether every run finished with exact sums."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(
        {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "rows": rows}, indent=1) + "\n")
    table = "\n".join(header + [f"| {row_cells(r)} |" for r in rows])
    (RESULTS / f"{name}.md").write_text(table + "\n")
    print(table)
    return 0 if all(r["status"] == "ok" and r["correct"] for r in rows) else 1


def emulated_fabric_row(name: str, scenario: "Scenario") -> dict:
    """One fabric's row of an emulation bench: its prediction and breakdown, what the run measured,
    its wall time and when."""
    import time

    from testbed.planning.plan import plan, prepare

    started = time.monotonic()
    found = plan(scenario)
    result = run_in_tempdir(prepare(scenario))
    return {"fabric": name, "predicted_ms": found.prediction.iteration_time_s * 1e3,
            "breakdown": found.prediction.breakdown.describe(), **run_summary(result),
            "error": result.get("error"), "wall_s": time.monotonic() - started,
            "measured": datetime.now(timezone.utc).isoformat(timespec="minutes")[:16]}


def save_fabric_rows(name: str, rows: list[dict], order: list[str], title: list[str]) -> int:
    """Rows of an emulation bench merged with the rows it did not re-run this time (each keeps the
    date it was measured on), in `order`, under `title`."""
    saved = RESULTS / f"{name}.json"
    ran = {r["fabric"] for r in rows}
    kept = [r for r in json.loads(saved.read_text())["rows"] if r["fabric"] not in ran] if saved.exists() else []
    rows = sorted(kept + rows, key=lambda r: order.index(r["fabric"]))
    header = [*title, "| fabric | predicted (ms) | emulated/predicted min / mean / max | sums | faithful | flagged | "
              "dilation | wall (s) | predicted breakdown | measured |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    return save_rows(name, rows, header, lambda r: (
        f"{r['fabric']} | {r['predicted_ms']:.3f} | {ratio_cells(r)} | {r['flagged'] or '-'} | "
        f"{cell(r['dilation'], 0)} | {r['wall_s']:.0f} | {r['breakdown']} | {r['measured']}"))


def run_fabric_bench(name: str, description: str, fabrics: dict[str, dict], scenario_of: Callable[[str], Path],
                     title: list[str]) -> int:
    """An emulation bench over fabrics (`fabrics`: each row's overrides of `scenario_of(row)`), with
    `--only ROW,...` to re-run some rows and keep the others' last results."""
    import argparse

    from testbed.planning.overrides import apply_overrides
    from testbed.planning.scenario_file import load_scenario

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--only", help="comma-separated rows (default: all of them)")
    args = parser.parse_args()
    rows = []
    for row in args.only.split(",") if args.only else list(fabrics):
        rows.append(emulated_fabric_row(row, apply_overrides(load_scenario(scenario_of(row)), fabrics[row])))
        print(rows[-1], flush=True)
    return save_fabric_rows(name, rows, list(fabrics), title)

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

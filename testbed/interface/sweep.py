"""Parameter sweeps: the cross product of `--set key=v1,v2` over a scenario, one run directory per
point, resumable (a point whose run finished is never run again), and one tidy CSV with a row per
run and iteration. Point planning and the CSV are pure; `run_sweep` drives the runner."""

from __future__ import annotations

import csv
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from testbed.core.errors import InputError
from testbed.core.scenario import Scenario, apply_overrides

MANIFEST = "sweep.json"
CSV_NAME = "results.csv"


@dataclass(frozen=True)
class SweepPoint:
    index: int
    overrides: dict[str, Any]

    @property
    def id(self) -> str:
        parts = [f"{key.rsplit('.', 1)[-1]}={value}" for key, value in self.overrides.items()]
        return re.sub(r"[^A-Za-z0-9_.=-]", "_", "-".join([f"p{self.index:03d}"] + parts))[:120]


def parse_sets(sets: list[str]) -> dict[str, list[Any]]:
    """`key=v1,v2,...` strings → {key: [values]}; values are read as YAML scalars (100, 1e3, ina, true)."""
    parsed: dict[str, list[Any]] = {}
    for item in sets:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key or not values.strip():
            raise InputError(f"--set {item!r}: expected key=value[,value...], e.g. fabric.gpu_bandwidth_gbps=100,400")
        if key in parsed:
            raise InputError(f"--set {key} is given twice; put all its values in one --set {key}=v1,v2")
        try:
            parsed[key] = [yaml.safe_load(v.strip()) for v in values.split(",")]
        except yaml.YAMLError:
            raise InputError(f"--set {item!r}: a value is not a plain number, word or boolean") from None
    if not parsed:
        raise InputError("a sweep needs at least one --set key=v1,v2")
    return parsed


def plan_points(scenario: Scenario, sets: dict[str, list[Any]]) -> list[tuple[SweepPoint, Scenario]]:
    """Every point of the cross product, validated before anything runs: a bad point names itself."""
    keys = list(sets)
    planned = []
    for index, values in enumerate(itertools.product(*(sets[k] for k in keys))):
        point = SweepPoint(index, dict(zip(keys, values)))
        try:
            planned.append((point, apply_overrides(scenario, point.overrides)))
        except InputError as error:
            raise InputError(f"sweep point {point.id}: {error}") from None
    return planned


def check_manifest(sweep_dir: Path, manifest: dict) -> bool:
    """True if `sweep_dir` already holds this sweep (resume), False if it is new; InputError if it
    holds another one."""
    path = sweep_dir / MANIFEST
    if not path.exists():
        return False
    existing = json.loads(path.read_text())
    if {k: existing.get(k) for k in ("scenario", "sets")} != {k: manifest[k] for k in ("scenario", "sets")}:
        raise InputError(f"{sweep_dir} holds another sweep ({existing.get('scenario')} with "
                         f"{existing.get('sets')}); choose another --out")
    return True


def finished(run_dir: Path) -> bool:
    """A point counts as done once its run wrote results and was not interrupted."""
    try:
        return json.loads((run_dir / "results.json").read_text())["status"] in ("ok", "failed")
    except (OSError, ValueError, KeyError):
        return False


def csv_rows(sweep_dir: Path, points: list[SweepPoint]) -> list[dict[str, Any]]:
    rows = []
    for point in points:
        run_dir = sweep_dir / "runs" / point.id
        try:
            result = json.loads((run_dir / "results.json").read_text())
        except (OSError, ValueError):
            continue
        common = {"point": point.id, **point.overrides, "status": result.get("status"),
                  "predicted_s": result.get("predicted_iteration_time_s"),
                  "faithful": (result.get("fidelity") or {}).get("ok"), "sums_correct": result.get("sums_correct"),
                  "dilation": result.get("dilation"), "byte_scale": result.get("byte_scale"),
                  "run_dir": str(Path("runs") / point.id)}
        times = result.get("iteration_times_s") or []
        ratios = result.get("emulated_over_predicted") or []
        if not times:
            rows.append({**common, "iteration": None, "emulated_s": None, "emulated_over_predicted": None})
        for iteration, (emulated, ratio) in enumerate(zip(times, ratios)):
            rows.append({**common, "iteration": iteration, "emulated_s": emulated, "emulated_over_predicted": ratio})
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]], keys: list[str]) -> None:
    columns = ["point", *keys, "iteration", "emulated_s", "predicted_s", "emulated_over_predicted", "status",
               "faithful", "sums_correct", "dilation", "byte_scale", "run_dir"]
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


def run_sweep(scenario_path: str, scenario: Scenario, sets: dict[str, list[Any]], sweep_dir: Path,
              execute: Callable[[Scenario, Path], dict], on_point: Callable[[int, int, str, str], None]) -> dict:
    """Runs every point not yet finished; stops at the first interrupted one. `execute` runs one
    scenario into a run directory and returns its results (the runner, or the oracle alone)."""
    planned = plan_points(scenario, sets)
    manifest = {"scenario": str(Path(scenario_path).resolve()), "sets": sets,
                "points": [{"id": p.id, "overrides": p.overrides} for p, _ in planned]}
    resumed = check_manifest(sweep_dir, manifest)
    (sweep_dir / "runs").mkdir(parents=True, exist_ok=True)
    if not resumed:
        (sweep_dir / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    counts = {"ran": 0, "skipped": 0, "failed": 0, "interrupted": False}
    points = [p for p, _ in planned]
    for done, (point, point_scenario) in enumerate(planned):
        run_dir = sweep_dir / "runs" / point.id
        if finished(run_dir):
            counts["skipped"] += 1
            on_point(done + 1, len(planned), point.id, "done before")
            continue
        result = execute(point_scenario, run_dir)
        counts["ran"] += 1
        counts["failed"] += result.get("status") == "failed"
        write_csv(sweep_dir / CSV_NAME, csv_rows(sweep_dir, points), list(sets))
        on_point(done + 1, len(planned), point.id, result.get("status", "failed"))
        if result.get("status") == "interrupted":
            counts["interrupted"] = True
            break
    write_csv(sweep_dir / CSV_NAME, csv_rows(sweep_dir, points), list(sets))
    return counts

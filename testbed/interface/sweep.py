"""Parameter sweeps: the cross product of `--set key=v1,v2` over a scenario, one run directory per
point, resumable (a point whose run finished is never run again), and one tidy CSV with a row per
run and iteration. Point planning and the CSV are pure; `run_sweep` drives the runner."""

from __future__ import annotations

import csv
import itertools
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from testbed.interface.records import SWEEP_COLUMNS
from testbed.model.errors import InputError
from testbed.model.input_files import RECORD_BYTES, read_json
from testbed.model.scenario import Scenario
from testbed.planning.overrides import apply_overrides, effective_overrides, override_applies
from testbed.planning.plan import predict_scenario
from testbed.planning.scenario_file import scenario_to_yaml, yaml_value

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
            parsed[key] = [yaml_value(v.strip()) for v in values.split(",")]
        except (yaml.YAMLError, RecursionError):
            raise InputError(f"--set {item[:60]!r}: a value is not a plain number, word or boolean") from None
    if not parsed:
        raise InputError("a sweep needs at least one --set key=v1,v2")
    return parsed


def plan_points(scenario: Scenario, sets: dict[str, list[Any]]) -> list[tuple[SweepPoint, Scenario]]:
    """Every point of the cross product, validated before anything runs: a bad point names itself."""
    keys = list(sets)
    planned = []
    seen: list[dict[str, Any]] = []
    for index, values in enumerate(itertools.product(*(sets[k] for k in keys))):
        point = SweepPoint(index, dict(zip(keys, values)))
        try:
            effective = effective_overrides(scenario, point.overrides)
            if effective in seen:  # a `<kind>:` value of a kind this point is not: the same point again
                continue
            seen.append(effective)
            kind = point.overrides.get("fabric.kind", scenario.fabric.kind)
            # The point names (and its row lists) only the values that apply to its kind.
            point = SweepPoint(index, {key: value for key, value in point.overrides.items()
                                       if override_applies(key, kind)})
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
    existing = read_json(path, "a sweep's sweep.json (or choose another --out)", RECORD_BYTES, finite=False)
    if not isinstance(existing, dict):
        raise InputError(f"{path}: not a sweep's manifest; choose another --out")
    if {k: existing.get(k) for k in ("scenario", "sets")} != {k: manifest[k] for k in ("scenario", "sets")}:
        raise InputError(f"{sweep_dir} holds another sweep ({existing.get('scenario')} with "
                         f"{existing.get('sets')}); choose another --out")
    return True


def finished(run_dir: Path) -> bool:
    """A point counts as done once its run wrote results and was not interrupted (a point whose
    machine was lost is not done: the next run of the sweep tries it again)."""
    try:
        result = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(result, dict) and result.get("status") in ("ok", "failed") and not result.get("lost_node")


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` (0 <= I < N) → (I, N): this job runs the points whose index is I modulo N."""
    index, sep, count = text.partition("/")
    try:
        shard = (int(index), int(count))
    except ValueError:
        shard = (-1, 0)
    if not sep or shard[1] < 1 or not 0 <= shard[0] < shard[1]:
        raise InputError(f"--shard {text!r}: expected I/N with 0 <= I < N, e.g. --shard 0/4 ... --shard 3/4 "
                         f"(a SLURM array: --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)")
    return shard


def in_shard(point: SweepPoint, shard: tuple[int, int] | None) -> bool:
    return shard is None or point.index % shard[1] == shard[0]


def csv_rows(sweep_dir: Path, points: list[SweepPoint]) -> list[dict[str, Any]]:
    return [row for point in points for row in point_rows(sweep_dir, point)]


def point_rows(sweep_dir: Path, point: SweepPoint) -> list[dict[str, Any]]:
    """The table's rows of one point: one per measured iteration (one if none), none if the point
    has no results yet."""
    rows: list[dict[str, Any]] = []
    run_dir = sweep_dir / "runs" / point.id
    try:
        result = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        return rows
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


def csv_columns(keys: list[str]) -> list[str]:
    return ["point", *keys, *SWEEP_COLUMNS]


def write_csv(path: Path, rows: list[dict[str, Any]], keys: list[str]) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=csv_columns(keys), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


def predict_point(scenario: Scenario, run_dir: Path) -> dict[str, Any]:
    """A sweep point answered by the oracle alone (paper scale, no root): its run directory holds
    the scenario and results.json."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "scenario.yaml").write_text(scenario_to_yaml(scenario))
    result: dict[str, Any]
    try:
        prediction = predict_scenario(scenario)
        result = {"name": scenario.name, "status": "ok", "mode": "predicted", "error": None,
                  "predicted_iteration_time_s": prediction.iteration_time_s,
                  "predicted_breakdown": prediction.breakdown.to_json(), "formula": prediction.formula,
                  "iteration_times_s": [], "emulated_over_predicted": []}
    except InputError as error:
        result = {"name": scenario.name, "status": "failed", "mode": "predicted", "error": str(error),
                  "iteration_times_s": [], "emulated_over_predicted": []}
    (run_dir / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def csv_name(shard: tuple[int, int] | None) -> str:
    """Shards sharing one directory each write their own table (`testbed sweep-merge` joins them)."""
    return CSV_NAME if shard is None else f"results-shard-{shard[0]}-of-{shard[1]}.csv"


@dataclass
class OpenSweep:
    """A sweep directory ready to run: the points still to run, and how to record each result."""

    sweep_dir: Path
    keys: list[str]
    points: list[SweepPoint]  # every point of this job (its shard), finished or not
    pending: list[tuple[SweepPoint, Scenario]]
    skipped: int
    csv_path: Path

    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # point id -> its rows, once read
    table_written: bool = False  # by this process: rows from an earlier, interrupted one may be stale

    def run_dir(self, point: SweepPoint) -> Path:
        return self.sweep_dir / "runs" / point.id

    def write_table(self) -> None:
        """The whole table, in point order, from the rows read so far (each point's are read once)."""
        for point in self.points:
            if point.id not in self.rows:
                self.rows[point.id] = point_rows(self.sweep_dir, point)
        write_csv(self.csv_path, [row for point in self.points for row in self.rows[point.id]], self.keys)
        self.table_written = True

    def record(self, point: SweepPoint) -> None:
        """A point just finished: its rows go to the end of the table (finishing order; the final
        write_table puts every row in point order). Rewriting the table per point would read every
        finished point's results again: quadratic in a sweep of thousands of points."""
        self.rows[point.id] = point_rows(self.sweep_dir, point)
        if not self.table_written:
            self.write_table()
            return
        with open(self.csv_path, "a", newline="") as out:
            csv.DictWriter(out, fieldnames=csv_columns(self.keys), extrasaction="ignore").writerows(self.rows[point.id])


def open_sweep(scenario_path: str, scenario: Scenario, sets: dict[str, list[Any]], sweep_dir: Path,
               shard: tuple[int, int] | None = None,
               on_skip: Callable[[SweepPoint], None] = lambda point: None) -> OpenSweep:
    """Plans the points (all validated), writes or checks the manifest, and finds what is left to run."""
    planned = plan_points(scenario, sets)
    manifest = {"scenario": str(Path(scenario_path).resolve()), "sets": sets,
                "points": [{"id": p.id, "overrides": p.overrides} for p, _ in planned]}
    resumed = check_manifest(sweep_dir, manifest)
    (sweep_dir / "runs").mkdir(parents=True, exist_ok=True)
    if not resumed:
        (sweep_dir / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    mine = [(p, s) for p, s in planned if in_shard(p, shard)]
    pending = []
    for point, point_scenario in mine:
        if finished(sweep_dir / "runs" / point.id):
            on_skip(point)
        else:
            pending.append((point, point_scenario))
    return OpenSweep(sweep_dir, list(sets), [p for p, _ in mine], pending, len(mine) - len(pending),
                     sweep_dir / csv_name(shard))


def run_sweep(scenario_path: str, scenario: Scenario, sets: dict[str, list[Any]], sweep_dir: Path,
              execute: Callable[[Scenario, Path], dict], on_point: Callable[[SweepPoint, str], None],
              shard: tuple[int, int] | None = None) -> dict:
    """Runs every point not yet finished, one after another; stops at the first interrupted one.
    `execute` runs one scenario into a run directory and returns its results (the runner, or the
    oracle alone)."""
    sweep = open_sweep(scenario_path, scenario, sets, sweep_dir, shard, lambda point: on_point(point, "done before"))
    counts = {"ran": 0, "skipped": sweep.skipped, "failed": 0, "interrupted": False}
    for point, point_scenario in sweep.pending:
        result = execute(point_scenario, sweep.run_dir(point))
        counts["ran"] += 1
        counts["failed"] += result.get("status") == "failed"
        sweep.record(point)
        on_point(point, result.get("status", "failed"))
        if result.get("status") == "interrupted":
            counts["interrupted"] = True
            break
    sweep.write_table()
    return counts


def merge_sweeps(out: Path, sources: list[Path]) -> dict[str, Any]:
    """Joins sweep directories of one sweep (its shards, run on several machines or jobs) into
    `out`: every finished run directory copied once, one manifest, one results.csv. Returns the
    counts and the ids of points no source finished."""
    manifests = []
    for source in sources:
        manifest = read_json(source / MANIFEST, "a sweep directory's manifest (give the shards' --out "
                             "directories)", RECORD_BYTES, finite=False) if (source / MANIFEST).exists() else None
        if not isinstance(manifest, dict):
            raise InputError(f"{source} is not a sweep directory (no readable {MANIFEST}); give the --out "
                             f"directories of the shards")
        manifests.append(manifest)
    first = manifests[0]
    for source, manifest in zip(sources[1:], manifests[1:]):
        if (manifest.get("sets"), manifest.get("points")) != (first.get("sets"), first.get("points")):
            raise InputError(f"{source} holds another sweep than {sources[0]} (its --set values or points "
                             f"differ); merge only the shards of one sweep")
    out_manifest = out / MANIFEST
    if out_manifest.exists():
        existing = read_json(out_manifest, "a sweep's sweep.json (or choose another --out)", RECORD_BYTES, finite=False)
        if not isinstance(existing, dict) or \
                (existing.get("sets"), existing.get("points")) != (first.get("sets"), first.get("points")):
            raise InputError(f"{out} holds another sweep; choose another --out")
    (out / "runs").mkdir(parents=True, exist_ok=True)
    if not out_manifest.exists():
        out_manifest.write_text(json.dumps(first, indent=1) + "\n")
    points = [SweepPoint(index, p["overrides"]) for index, p in enumerate(first["points"])]  # in index order
    copied, missing = 0, []
    for point in points:
        target = out / "runs" / point.id
        if finished(target):
            continue
        found = next((s / "runs" / point.id for s in sources if finished(s / "runs" / point.id)), None)
        if found is None:
            missing.append(point.id)
            continue
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(found, target)
        copied += 1
    write_csv(out / CSV_NAME, csv_rows(out, points), list(first["sets"]))
    return {"points": len(points), "copied": copied, "missing": missing}

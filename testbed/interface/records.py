"""A run's and a sweep's own files as `report` and the API read them back: results.json an object
whose iteration times are real durations, results.csv a table with its columns and finite figures;
a damaged file is one InputError naming it."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from testbed.model.errors import InputError
from testbed.model.input_files import RECORD_BYTES, read_json, read_text

# What a sweep's table holds after its point and the swept fields (testbed sweep writes it).
SWEEP_COLUMNS = ("iteration", "emulated_s", "predicted_s", "emulated_over_predicted", "status", "faithful",
                 "sums_correct", "dilation", "byte_scale", "run_dir")
SWEEP_FIGURES = ("predicted_s", "emulated_s")


def _duration(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def run_results(run_dir: Path) -> dict[str, Any]:
    """results.json of a run directory: an object whose times are positive, finite seconds."""
    result = read_json(run_dir / "results.json", "a run's results.json", RECORD_BYTES, finite=False)
    if not isinstance(result, dict):
        raise InputError(f"{run_dir}/results.json holds a {type(result).__name__}, not a run's results")
    times = result.get("iteration_times_s")
    for value in [*(times if isinstance(times, list) else [times]), result.get("predicted_iteration_time_s")]:
        if not _duration(value):
            raise InputError(f"{run_dir}/results.json: {str(value)[:40]} is not an iteration time (a positive "
                             f"number of seconds)")
    for key in ("breakdown", "predicted_breakdown", "fidelity", "jobs"):
        if result.get(key) is not None and not isinstance(result[key], dict):
            raise InputError(f"{run_dir}/results.json: '{key}' holds a {type(result[key]).__name__}, not a "
                             f"mapping")
    return result


def sweep_text(sweep_dir: Path, keys: tuple[str, ...] = ()) -> str:
    """results.csv of a sweep directory, checked: the columns every sweep writes (and `keys`, the
    swept fields), and each figure empty or a positive, finite number of seconds."""
    path = sweep_dir / "results.csv"
    text = read_text(path, "a sweep's results.csv (testbed sweep --out DIR)", RECORD_BYTES)
    if not text.strip():
        return text  # no point finished yet
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in ("point", *keys, *SWEEP_COLUMNS) if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"{path}: no column '{missing[0]}' (a sweep's table has its point, the swept fields "
                         f"and {', '.join(SWEEP_COLUMNS)})")
    try:
        for line, row in enumerate(reader, 2):
            for column in SWEEP_FIGURES:
                value = row.get(column)
                if value and not _duration(_number(value)):
                    raise InputError(f"{path} line {line}: {column} {value[:40]!r} is not a time in seconds")
    except csv.Error as error:
        raise InputError(f"{path}: not a table ({error})") from None
    return text


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None

"""`testbed report`: PNG figures and a one-page Markdown summary of a run directory (timeline of
compute, communication and dark time per host; breakdown against the prediction; traffic matrix;
circuit and wavelength changes) or of a sweep directory (emulated against predicted)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from testbed.emulation.plots import draw_steps  # noqa: E402
from testbed.interface.records import run_results, sweep_text  # noqa: E402
from testbed.model.errors import InputError  # noqa: E402
from testbed.model.input_files import RECORD_BYTES, read_json, read_json_lines  # noqa: E402


def _load_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return read_json_lines(path, "a run's events", RECORD_BYTES, finite=False)


# What a damaged directory raises when read: truncated or hand-edited JSON, missing keys, values of
# the wrong type, text that is not UTF-8.
DAMAGED = (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError, ZeroDivisionError)


def report(directory: Path, out: Path | None = None) -> Path:
    """Writes the figures and report.md into `out` (by default `directory`); returns report.md's path."""
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    if (directory / "sweep.json").exists():
        kind, write = "sweep", lambda: sweep_report(directory, out or directory)
    elif (directory / "results.json").exists():
        kind, write = "run", lambda: run_report(directory, out or directory)
    else:
        raise InputError(f"{directory} is neither a run directory (results.json) nor a sweep directory (sweep.json)")
    try:
        return write()
    except InputError as error:
        raise InputError(f"a damaged {kind} directory: {error}; run it again or give another") from None
    except DAMAGED as error:
        what = str(error).splitlines()[0][:120] if str(error) else type(error).__name__
        raise InputError(f"{directory}: a damaged {kind} directory ({type(error).__name__}: {what}); run it "
                         f"again or give another") from None


def run_report(run_dir: Path, out: Path | None = None) -> Path:
    out = out or run_dir
    result = run_results(run_dir)
    events = _load_jsonl(run_dir / "events.jsonl")
    figures = []
    if events:
        figures.append(_gantt(out, events, result))
    figures.append(_breakdown(out, result))
    schedule_path = run_dir / "schedule.json"
    if schedule_path.exists():
        matrix = read_json(schedule_path, "a run's schedule.json", RECORD_BYTES).get("traffic_matrix_bytes") or []
        if any(any(row) for row in matrix):
            figures.append(_traffic(out, matrix))
    reconfigurations = [e for e in events if e.get("kind") == "reconfiguration"]
    if reconfigurations:
        figures.append(_circuits(out, reconfigurations))
    if result.get("jobs"):
        figures.append(_jobs(out, result))
    path = out / "report.md"
    path.write_text(_run_markdown(result, figures))
    return path


def _save(fig, directory: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(directory / name, dpi=110)
    plt.close(fig)
    return name


def _gantt(run_dir: Path, events: list[dict], result: dict) -> str:
    fig, ax = plt.subplots(figsize=(12, 0.35 * max(4, 1 + max(e["host"] for e in events)) + 1.5))
    draw_steps(ax, events)
    ax.set_title(f"{result['name']}: steps per host and dark time")
    return _save(fig, run_dir, "gantt.png")


def _breakdown(run_dir: Path, result: dict) -> str:
    emulated = result.get("breakdown") or {}
    predicted = result.get("predicted_breakdown") or {}
    parts = ["compute_s", "communication_s", "reconfiguration_s"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for column, (label, source) in enumerate((("emulated", emulated), ("predicted", predicted))):
        bottom = 0.0
        for part, colour in zip(parts, ("tab:purple", "tab:blue", "tab:red")):
            value = (source.get(part) or 0.0) * 1e3
            drawn = ax.bar(column, value, bottom=bottom, color=colour, label=part[:-2] if column == 0 else None)
            if value > 0:
                ax.bar_label(drawn, labels=[f"{value:.3g}"], label_type="center", fontsize="small", color="white")
            bottom += value
        ax.annotate(f"{bottom:.3g} ms", (column, bottom), ha="center", va="bottom", xytext=(0, 2),
                    textcoords="offset points")
    ax.set_xticks([0, 1], ["emulated (mean)", "predicted"])
    ax.set_ylim(0, ax.get_ylim()[1] * 1.12)  # room for the totals above the bars
    ax.set_ylabel("real-world ms per iteration")
    ax.set_title(f"{result['name']}: where the time goes")
    ax.legend()
    return _save(fig, run_dir, "breakdown.png")


def _jobs(run_dir: Path, result: dict) -> str:
    """jobs.png: each job's iterations against its prediction beside the other jobs."""
    jobs = result["jobs"]
    fig, axes = plt.subplots(1, len(jobs), figsize=(3.2 * len(jobs) + 1, 3.8), squeeze=False)
    for ax, (name, job) in zip(axes[0], jobs.items()):
        times = [t * 1e3 for t in job.get("iteration_times_s", [])]
        predicted = (job.get("predicted_iteration_time_s") or 0.0) * 1e3
        drawn = ax.bar(range(len(times)), times, color="tab:blue")
        ax.bar_label(drawn, fmt="%.3g", fontsize="small")
        ax.axhline(predicted, color="black", linestyle="--")
        ax.set_xticks(range(len(times)))
        ax.set_ylim(0, max(times + [predicted]) * 1.15 or 1)
        ax.set_title(f"job {name} ({len(job.get('gpus', []))} GPUs)")
        ax.set_xlabel("iteration")
    axes[0][0].set_ylabel("iteration time (ms, real-world)\ndashed: predicted beside the others")
    return _save(fig, run_dir, "jobs.png")


def _traffic(run_dir: Path, matrix: list[list[float]]) -> str:
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    image = ax.imshow([[v / 1e6 for v in row] for row in matrix], cmap="viridis")
    fig.colorbar(image, ax=ax, label="MB per iteration (real-world)")
    ax.set_xlabel("to GPU")
    ax.set_ylabel("from GPU")
    ax.set_title("traffic matrix")
    return _save(fig, run_dir, "traffic.png")


def _circuits(run_dir: Path, reconfigurations: list[dict]) -> str:
    links = sorted({json.dumps(c) for e in reconfigurations for c in e.get("changed", [])})
    rows = {link: i for i, link in enumerate(links)}
    fig, ax = plt.subplots(figsize=(10, 0.25 * max(4, len(links)) + 1.5))
    for event in reconfigurations:
        for changed in event.get("changed", []):
            start, end = event["dark_start_s"] * 1e3, event["restored_s"] * 1e3
            ax.broken_barh([(start, max(end - start, 1e-6))], (rows[json.dumps(changed)] - 0.4, 0.8),
                           facecolors="tab:red")
    ax.set_yticks(range(len(links)), [link.replace('"', "") for link in links], fontsize=7)
    ax.set_xlabel("real-world time since the run's epoch (ms)")
    ax.set_title(f"{len(reconfigurations)} reconfigurations: dark time of each changed circuit or wavelength")
    return _save(fig, run_dir, "circuits.png")


def _fmt(value, scale: float = 1.0, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value * scale:.{digits}g}"


def _run_markdown(result: dict, figures: list[str]) -> str:
    lines = [f"# {result['name']}", "",
             f"Status **{result['status']}**" + (f": {result['error']}" if result.get("error") else "") + "; "
             f"sums {'correct' if result.get('sums_correct') else 'NOT checked or wrong'}; "
             f"fidelity {'faithful' if (result.get('fidelity') or {}).get('ok') else 'NOT faithful'}; "
             f"dilation {_fmt(result.get('dilation'))}, byte scale {_fmt(result.get('byte_scale'))}."]
    if result.get("jobs"):  # each job at its own pace: the top-level figures are only the first job's
        lines += _jobs_markdown(result["jobs"])
    else:
        lines += ["", "| iteration | emulated (ms) | predicted (ms) | emulated/predicted |",
                  "| ---: | ---: | ---: | ---: |"]
        predicted = result.get("predicted_iteration_time_s")
        for i, (t, r) in enumerate(zip(result.get("iteration_times_s", []),
                                       result.get("emulated_over_predicted", []))):
            lines.append(f"| {i} | {_fmt(t, 1e3, 4)} | {_fmt(predicted, 1e3, 4)} | {_fmt(r)} |")
    lines += ["", "| fidelity monitor | value | ok | detail | fix |", "| --- | ---: | :---: | --- | --- |"]
    for name, monitor in ((result.get("fidelity") or {}).get("monitors") or {}).items():
        lines.append(f"| {name} | {_fmt(monitor.get('value'))} | {'yes' if monitor.get('ok') else 'NO'} | "
                     f"{monitor.get('detail', '')} | {monitor.get('fix', '')} |")
    lines.append("")
    lines += [f"![{name}]({name})" for name in figures]
    return "\n".join(lines) + "\n"


def _sweep_scatter(sweep_dir: Path, keys: list[str], measured: list[tuple[str, dict]]) -> str:
    """Emulated against predicted, one colour per value of the last swept field."""
    fig, ax = plt.subplots(figsize=(6, 5))
    xs = [float(e["row"]["predicted_s"]) * 1e3 for _, e in measured]
    ys = [sum(e["emulated"]) / len(e["emulated"]) * 1e3 for _, e in measured]
    for group in sorted({e["row"][keys[-1]] for _, e in measured}):
        pts = [(x, y) for (x, y, (_, e)) in zip(xs, ys, measured) if e["row"][keys[-1]] == group]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=f"{keys[-1].rsplit('.', 1)[-1]}={group}")
    top = max(xs + ys) * 1.1
    ax.plot([0, top], [0, top], "k--", lw=1, label="emulated = predicted")
    ax.legend(fontsize=8)
    ax.set_xlabel("predicted iteration time (ms)")
    ax.set_ylabel("emulated iteration time (ms, mean)")
    ax.set_title("sweep: emulated against predicted")
    return _save(fig, sweep_dir, "scatter.png")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _sweep_predicted(sweep_dir: Path, keys: list[str], per_point: dict[str, dict]) -> str:
    """A prediction-only sweep: predicted time against the last numeric swept field, one line per
    combination of the others (per fabric, where the sweep crosses fabrics)."""
    rows = [e["row"] for e in per_point.values() if e["row"]["predicted_s"]]
    numeric = [k for k in keys if rows and all(_number(r[k]) is not None for r in rows if r[k] != "")]
    x_key = numeric[-1] if numeric else None
    others = [k for k in keys if k != x_key]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lines: dict[tuple[str, ...], list[tuple[float, float]]] = {}
    for index, row in enumerate(rows):
        x = _number(row[x_key]) if x_key and row[x_key] != "" else float(index)
        if x is not None:
            lines.setdefault(tuple(row[k] for k in others), []).append((x, float(row["predicted_s"]) * 1e3))
    for group, points in sorted(lines.items()):
        points.sort()
        label = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in zip(others, group) if v != "") or "predicted"
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    ax.set_xlabel(x_key or "point")
    ax.set_ylabel("predicted iteration time (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title("sweep: predicted iteration time")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return _save(fig, sweep_dir, "predicted.png")


def sweep_report(sweep_dir: Path, out: Path | None = None) -> Path:
    manifest = read_json(sweep_dir / "sweep.json", "a sweep's sweep.json", RECORD_BYTES, finite=False)
    keys = list(manifest["sets"])
    rows = list(csv.DictReader(io.StringIO(sweep_text(sweep_dir, tuple(keys)))))
    per_point: dict[str, dict] = {}
    for row in rows:
        entry = per_point.setdefault(row["point"], {"row": row, "emulated": []})
        if row["emulated_s"]:
            entry["emulated"].append(float(row["emulated_s"]))
    measured = [(p, e) for p, e in per_point.items() if e["emulated"] and e["row"]["predicted_s"]]
    out = out or sweep_dir
    figures = [_sweep_scatter(out, keys, measured) if measured else _sweep_predicted(out, keys, per_point)]
    lines = [f"# Sweep of {Path(manifest['scenario']).name}", "",
             "Swept: " + "; ".join(f"`{k}` = {', '.join(map(str, v))}" for k, v in manifest["sets"].items()), ""]
    names = " | ".join(k.rsplit(".", 1)[-1] for k in keys)
    if measured:
        lines += [f"| point | {names} | predicted (ms) | emulated (ms, mean) | ratio | status | faithful |",
                  "| --- | " + " | ".join("---" for _ in keys) + " | ---: | ---: | ---: | --- | --- |"]
    else:  # a prediction-only sweep: nothing emulated, so nothing to call faithful or not
        lines += [f"| point | {names} | predicted (ms) | status |", "| --- | " + " | ".join("---" for _ in keys)
                  + " | ---: | --- |"]
    for point, entry in per_point.items():
        row = entry["row"]
        predicted = float(row["predicted_s"]) if row["predicted_s"] else None
        values = " | ".join(row[k] for k in keys)
        if not measured:
            lines.append(f"| {point} | {values} | {_fmt(predicted, 1e3, 4)} | {row['status']} |")
            continue
        emulated = sum(entry["emulated"]) / len(entry["emulated"]) if entry["emulated"] else None
        ratio = emulated / predicted if emulated and predicted else None
        lines.append(f"| {point} | {values} | {_fmt(predicted, 1e3, 4)} | {_fmt(emulated, 1e3, 4)} | {_fmt(ratio)} | "
                     f"{row['status']} | {row['faithful']} |")
    lines += ["", *[f"![{name}]({name})" for name in figures]]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _jobs_markdown(jobs: dict) -> list[str]:
    """Each job's iterations at its own pace against its prediction beside the others, and where
    its time went."""
    lines = ["", "| job | GPUs | iteration | emulated (ms) | predicted (ms) | emulated/predicted |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, job in jobs.items():
        predicted = job.get("predicted_iteration_time_s")
        for i, (t, r) in enumerate(zip(job.get("iteration_times_s", []), job.get("emulated_over_predicted", []))):
            lines.append(f"| {name} | {len(job.get('gpus', []))} | {i} | {_fmt(t, 1e3, 4)} | "
                         f"{_fmt(predicted, 1e3, 4)} | {_fmt(r)} |")
    lines += ["", "| job | compute (ms) | communication (ms) | dark (ms) | retransmission waits (ms) |",
              "| --- | ---: | ---: | ---: | ---: |"]
    for name, job in jobs.items():
        parts = job.get("breakdown") or {}
        lines.append(f"| {name} | " + " | ".join(_fmt(parts.get(key), 1e3, 4) for key in (
            "compute_s", "communication_s", "reconfiguration_s", "retransmission_s")) + " |")
    return lines

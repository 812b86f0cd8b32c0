"""PNG plots of a run: a per-host timeline of its steps and iteration times against the prediction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

# Per step kind, and per phase of a collective's sends: what the bars of a timeline are.
# Each a colour of its own, so no two things shown look alike.
COLOURS = {"compute": "tab:purple", "send": "tab:blue", "recv": "tab:cyan", "collective": "tab:olive",
           "barrier": "lightgrey", "reduce-scatter": "tab:orange", "all-gather": "tab:green"}
LABELS = {"compute": "compute", "send": "send", "recv": "receive", "collective": "collective",
          "barrier": "waiting at the barrier", "reduce-scatter": "reduce-scatter", "all-gather": "all-gather",
          "dark": "dark time"}


def draw_steps(ax: Any, events: list[dict[str, Any]]) -> None:
    """A per-host timeline on `ax`: every step with a duration (a send coloured by its collective's
    phase where it has one), reconfigurations' dark time as red bands, and a legend of what is shown."""
    shown: set[str] = set()
    # One collection per host and colour: a 64-GPU run has ~50,000 steps, and an artist per step
    # took minutes to draw.
    bars: dict[tuple[int, str, bool], list[tuple[float, float]]] = {}
    for event in events:
        kind = event.get("kind", "")
        if kind == "reconfiguration":
            ax.axvspan(event["dark_start_s"] * 1e3, event["restored_s"] * 1e3, color="tab:red", alpha=0.25, lw=0)
            shown.add("dark")
            continue
        name = event.get("phase", kind) if kind == "send" and event.get("phase") in COLOURS else kind
        if name not in COLOURS or event.get("duration_s", 0) <= 0:
            continue
        bars.setdefault((event["host"], name, kind == "collective"), []).append(
            (event["t_s"] * 1e3, event["duration_s"] * 1e3))
        shown.add(name)
    for (host, name, faint), spans in bars.items():
        ax.broken_barh(spans, (host - 0.4, 0.8), facecolors=COLOURS[name], alpha=0.6 if faint else 1.0)
    handles = [Patch(color="tab:red" if name == "dark" else COLOURS[name], alpha=0.25 if name == "dark" else 1.0,
                     label=LABELS[name]) for name in sorted(shown)]
    if handles:  # beside the hosts, never over them
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small")
    ax.set_xlabel("real-world time since the run's epoch (ms)")
    ax.set_ylabel("host (rank)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def plot_run(run_dir: Path, events: list[dict[str, Any]], result: dict[str, Any]) -> None:
    """timeline.png: the steps per host beside each iteration's time against the prediction."""
    fig, (timeline, bars) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [3, 1]})
    draw_steps(timeline, events)
    timeline.set_title(f"{result['name']}: steps per host")
    times = [t * 1e3 for t in result["iteration_times_s"]]
    drawn = bars.bar(range(len(times)), times, color="tab:blue", label="emulated")
    bars.bar_label(drawn, fmt="%.3g", fontsize="small")
    bars.set_xticks(range(len(times)))  # one tick per iteration, at its bar
    bars.axhline(result["predicted_iteration_time_s"] * 1e3, color="black", linestyle="--", label="predicted")
    bars.set_xlabel("iteration")
    bars.set_ylabel("iteration time (ms, real-world)")
    bars.set_ylim(0, max(times + [result["predicted_iteration_time_s"] * 1e3]) * 1.15 or 1)
    bars.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize="small")
    fig.tight_layout()
    fig.savefig(run_dir / "timeline.png", dpi=110)
    plt.close(fig)

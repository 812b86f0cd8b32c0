"""PNG plots of a run: a per-host timeline of its steps and iteration times against the prediction."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLOURS = {"reduce-scatter": "tab:blue", "all-gather": "tab:green", "barrier": "lightgrey"}
LABELS = {"reduce-scatter": "reduce-scatter", "all-gather": "all-gather", "barrier": "waiting at the barrier"}


def plot_run(run_dir: Path, events: list[dict], result: dict) -> None:
    fig, (timeline, bars) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [3, 1]})
    for event in events:
        if event["kind"] == "send":
            colour = COLOURS.get(event.get("phase", ""), "tab:orange")
        elif event["kind"] == "barrier":
            colour = COLOURS["barrier"]
        else:
            continue
        timeline.broken_barh([(event["t_s"] * 1e3, event["duration_s"] * 1e3)], (event["host"] - 0.4, 0.8),
                             facecolors=colour)
    timeline.set_xlabel("real-world time since run start (ms)")
    timeline.set_ylabel("host (rank)")
    shown = {event.get("phase", "") if event["kind"] == "send" else "barrier" for event in events
             if event["kind"] in ("send", "barrier")}
    timeline.legend(handles=[Patch(color=COLOURS.get(name, "tab:orange"), label=LABELS.get(name, "other sends"))
                             for name in sorted(shown)], loc="upper right", fontsize="small")
    timeline.set_title(f"{result['name']}: steps per host")
    times = [t * 1e3 for t in result["iteration_times_s"]]
    bars.bar(range(len(times)), times, color="tab:blue", label="emulated")
    bars.axhline(result["predicted_iteration_time_s"] * 1e3, color="black", linestyle="--", label="predicted")
    bars.set_xlabel("iteration")
    bars.set_ylabel("iteration time (ms, real-world)")
    bars.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(run_dir / "timeline.png", dpi=110)
    plt.close(fig)

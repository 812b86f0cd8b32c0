"""`testbed compare`: several scenarios (typically one workload on several fabrics) side by side,
their predicted iteration time and its breakdown, and with `--run` what each emulated; as a table,
JSON, or a bar chart of the breakdowns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from testbed.model.scenario import Scenario  # noqa: E402
from testbed.planning.plan import predict_scenario  # noqa: E402

PARTS = (("compute_s", "compute", "tab:purple"), ("communication_s", "communication", "tab:blue"),
         ("reconfiguration_s", "dark time", "tab:red"), ("retransmission_s", "retransmissions", "tab:orange"))


@dataclass(frozen=True)
class Compared:
    """One scenario's row: where it came from, what it is, its prediction and (if run) emulation."""

    source: str
    name: str
    fabric: str
    hosts: int
    predicted_s: float
    breakdown: dict[str, float]
    emulated_s: list[float] | None = None  # each measured iteration, with --run
    faithful: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.source, "name": self.name, "fabric": self.fabric, "hosts": self.hosts,
                "predicted_iteration_time_s": self.predicted_s, "breakdown": self.breakdown,
                **({"iteration_times_s": self.emulated_s, "faithful": self.faithful}
                   if self.emulated_s is not None else {})}


def compare(scenarios: list[tuple[str, Scenario]]) -> list[Compared]:
    """Every scenario's one prediction, in the order given."""
    rows = []
    for source, scenario in scenarios:
        prediction = predict_scenario(scenario)
        rows.append(Compared(source, scenario.name, scenario.fabric.kind, scenario.fabric.hosts,
                             prediction.iteration_time_s, prediction.breakdown.to_json()))
    return rows


def with_run(row: Compared, result: dict[str, Any]) -> Compared:
    return Compared(row.source, row.name, row.fabric, row.hosts, row.predicted_s, row.breakdown,
                    list(result["iteration_times_s"]), bool(result["fidelity"]["ok"]))


def plot(rows: list[Compared], path: Path) -> Path:
    """Stacked bars of each scenario's predicted breakdown (ms), its total written on top, and the
    emulated mean beside it where the scenarios were run."""
    fig, ax = plt.subplots(figsize=(max(6.0, 2.2 * len(rows) + 2.0), 4.8))
    labels = [f"{r.name}\n{r.fabric}\n{r.hosts} GPUs" for r in rows]
    positions = range(len(rows))
    bottom = [0.0] * len(rows)
    for key, label, colour in PARTS:
        values = [r.breakdown.get(key, 0.0) * 1e3 for r in rows]
        if any(values):
            ax.bar(positions, values, 0.6, bottom=bottom, label=label, color=colour)
            bottom = [b + v for b, v in zip(bottom, values)]
    for x, r in zip(positions, rows):
        ax.annotate(f"{r.predicted_s * 1e3:.3g} ms", (x, r.predicted_s * 1e3), ha="center", va="bottom",
                    xytext=(0, 3), textcoords="offset points")
        if r.emulated_s:
            mean_ms = sum(r.emulated_s) / len(r.emulated_s) * 1e3
            ax.plot([x + 0.35], [mean_ms], marker="D", color="black",
                    label="emulated (mean)" if x == next(i for i, q in enumerate(rows) if q.emulated_s) else None)
    ax.set_xticks(list(positions), labels, fontsize=9)
    ax.set_ylabel("predicted iteration time (ms)")
    ax.set_ylim(0, max(max(bottom), max(r.predicted_s * 1e3 for r in rows)) * 1.15 or 1)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path

"""The reconfiguration-delay tables docs/reproduction.md and docs/sensitivity.md share, built from
bench/results/replan_sweep.json (8 GPUs) and replan_scale.json (1,024 GPUs)."""

from __future__ import annotations

import json

from bench_results import RESULTS


def rung_cell(row: dict) -> str:
    """A sweep row's rung (the dark time held and the gain a retune needs), or never."""
    return "never" if row["threshold_us"] is None else format(row["threshold_us"], "g")


def replan_tables() -> list[str]:
    """SiP-ML's reconfiguration-delay question: the prediction against the retune time and the
    estimation period, at emulation scale (bench/replan_sweep.py) and at 1,024 GPUs
    (bench/replan_scale.py), with the dark time's share of the iteration."""
    small, large = RESULTS / "replan_sweep.json", RESULTS / "replan_scale.json"
    if not (small.exists() and large.exists()):
        return []
    sweep, scale = json.loads(small.read_text()), json.loads(large.read_text())
    lines = ["", "## Reconfiguration delay and estimation period", "",
             f"SiP-Ring (16 × 25 Gb/s, reach 8) with placed models on 8 GPUs (mp 4 × dp 2), predicted with "
             f"the controller's re-plans (`bench/replan_sweep.py`, {sweep['when'][:10]}): the iteration, over "
             "standing still (never retuning), and the dark time's share. The rung is the dark time the "
             "controller holds and the gain a retune needs (docs/placer.md); the prediction never gets "
             "faster as the retune time grows.", "",
             "| model | period µs | retune µs | iteration ms | over standing still | dark share | rung µs |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['model']} | {r['period_us']:g} | {r['reconfig_us']:g} | {r['iteration_s'] * 1e3:.2f} | "
              f"{r['iteration_s'] / r['standing_still_s']:.3f} | {r['dark_share']:.1%} | "
              f"{rung_cell(r)} |" for r in sweep["rows"]]
    lines += ["", f"At N = 1,024 GPUs (`bench/replan_scale.py`, {scale['when'][:10]}): the placer's best plan "
              "for each retune time and period, its iteration and dark share.", "",
              "| model | period µs | retune µs | k × l, batch | iteration ms | dark share |",
              "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['model']} | {r['period_us']:g} | {r['reconfig_us']:g} | {r['k']} × {r['l']}, "
              f"{r['global_batch']} | {r['iteration_s'] * 1e3:.2f} | {r['dark_share']:.1%} |" for r in scale["rows"]]
    return lines

"""Benchmark: how the hypervisor's steal during an iteration moves its emulated/predicted.

On a virtual machine whose host is shared, the kernel counts the time its cores were taken away
(steal). This runs a scenario several times, puts each measured iteration's steal beside its
emulated/predicted, and tabulates them by steal: the evidence for the `steal` monitor's tolerance.
Steal comes and goes with the host's other tenants, so the table is only as varied as the host was
(bench/results/steal_contended.md kept one from a busy hour).

Run as root from the repository: `.venv/bin/python bench/steal.py [--runs 6] [--factor 2]
[--scenario quickstart] [--set key=value ...]`. Prints the table and writes bench/results/steal.json (and .md).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench_results import RESULTS, cell, run_in_tempdir, save_rows

from testbed.core.fidelity import STEAL_TOLERANCE
from testbed.interface.sweep import parse_sets
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
BINS = tuple(sorted({0.0, 0.02, 0.05, STEAL_TOLERANCE, 0.20, 0.30, 0.40, 1.01}))
BAND = (0.9, 1.1)


def iterations_of(result: dict, run: int, variant: str) -> list[dict]:
    return [{"variant": variant, "run": run, "iteration": i, "steal": steal, "ratio": ratio, "tcp_retransmits": rtx,
             "dilation": result["dilation"]}
            for i, (steal, ratio, rtx) in enumerate(zip(result["iteration_steal_frac"],
                                                        result["emulated_over_predicted"],
                                                        result["iteration_tcp_retransmits"]))]


def by_steal(iterations: list[dict], variant: str) -> list[dict]:
    rows = []
    for low, high in zip(BINS, BINS[1:]):
        inside = [it["ratio"] for it in iterations
                  if it["variant"] == variant and it["steal"] is not None and low <= it["steal"] < high]
        rows.append({"variant": variant, "steal": f"{low:.0%}-{min(high, 1):.0%}", "iterations": len(inside),
                     "ratio_mean": sum(inside) / len(inside) if inside else None,
                     "ratio_max": max(inside, default=None),
                     "outside_band": sum(not BAND[0] <= r <= BAND[1] for r in inside)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="quickstart", help="a shipped scenario's name")
    parser.add_argument("--runs", type=int, default=6, help="rounds; each runs the scenario as set, then "
                        "at --factor times the dilation that run used")
    parser.add_argument("--factor", type=float, default=2.0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    if not any(s.startswith("workload.iterations=") for s in args.set):
        args.set.append("workload.iterations=5")
    overrides = {key: values[0] for key, values in parse_sets(args.set).items()}
    scenario = apply_overrides(load_scenario(SCENARIOS / f"{args.scenario}.yaml"), overrides)
    iterations, statuses = [], []
    started = time.monotonic()
    variants = ("as set", f"{args.factor:g}x dilation")
    for run in range(args.runs):
        # Alternating the two in each round lets both meet the same spells of the host's load.
        first = run_in_tempdir(prepare(scenario))
        slower = run_in_tempdir(prepare(apply_overrides(scenario,
                                                        {"emulation.dilation": first["dilation"] * args.factor})))
        for variant, result in zip(variants, (first, slower)):
            statuses.append(result["status"] == "ok" and result["sums_correct"])
            iterations.extend(iterations_of(result, run, variant))
            print(f"run {run} {variant} (dilation {result['dilation']:.0f}): steal "
                  f"{[None if s is None else round(s, 3) for s in result['iteration_steal_frac']]} "
                  f"ratio {[round(r, 3) for r in result['emulated_over_predicted']]}", flush=True)
    rows = [row for variant in variants for row in by_steal(iterations, variant)]
    for row in rows:
        row.update(status="ok" if all(statuses) else "failed", correct=all(statuses))
    header = [f"{args.scenario} ({', '.join(args.set)}), {args.runs} rounds, {time.monotonic() - started:.0f} s; "
              f"emulated/predicted of each measured iteration by the steal during it",
              "", f"| run | steal | iterations | emulated/predicted mean | max | outside {BAND[0]}-{BAND[1]} |",
              "|---|---|---|---|---|---|"]
    code = save_rows("steal", rows, header, lambda r: f"{r['variant']} | {r['steal']} | {r['iterations']} | "
                                                       f"{cell(r['ratio_mean'], 3)} | {cell(r['ratio_max'], 3)} | "
                                                       f"{r['outside_band']}")
    (RESULTS / "steal_iterations.json").write_text(json.dumps(iterations, indent=1) + "\n")
    return code


if __name__ == "__main__":
    raise SystemExit(main())

"""Reconfiguration delay at paper scale, like SiP-ML's §5 sweep: the placer's best plan on a
1,024-GPU SiP-Ring for each retuning delay (1 µs to 10 ms) and estimation period, its time to
accuracy, iteration, and the dark time's share of the iteration. The oracle's estimate re-plans
every period, as the controller does. No root.

Run from the repository: `.venv/bin/python bench/replan_scale.py [--bandwidth GBPS]`. Writes
bench/results/replan_scale.json and replan_scale.md.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

from bench_results import save_rows
from placer_sweep import GPUS, fabrics, plan_cache
from rich.progress import Progress

from testbed.workloads.model.search import search

DELAYS_US = (1.0, 10.0, 25.0, 100.0, 1_000.0, 10_000.0)
PERIODS_US = (100.0, 1_000.0)


def point(model: str, bandwidth_gbps: float, delay_us: float, period_us: float) -> dict:
    started = time.monotonic()
    # The paper sweep's SiP-Ring at this bandwidth; placements do not depend on the delay.
    fabric = fabrics(bandwidth_gbps)["SiP-Ring"].model_copy(update={"reconfig_us": delay_us,
                                                                     "estimate_period_us": period_us})
    choice = search(plan_cache(model), GPUS, fabric)
    return {"status": "predicted", "correct": None, "model": model, "gpu_bandwidth_gbps": bandwidth_gbps,
            "reconfig_us": delay_us, "period_us": period_us, "k": choice.k, "l": choice.l,
            "global_batch": choice.global_batch, "iteration_s": choice.iteration_s,
            "time_to_accuracy_min": choice.time_to_accuracy_s / 60,
            "dark_share": choice.breakdown.get("reconfiguration_s", 0.0) / choice.iteration_s,
            "seconds": time.monotonic() - started}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bandwidth", type=float, default=1024, help="per-GPU bandwidth B, Gb/s")
    parser.add_argument("--models", default="resnet50,transformer,megatron")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    tasks = [(m, args.bandwidth, d, p) for m in args.models.split(",") for p in PERIODS_US for d in DELAYS_US]
    rows = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool, Progress() as progress:
        task = progress.add_task("sweep", total=len(tasks))
        for found in [pool.submit(point, *t) for t in tasks]:
            rows.append(found.result())
            progress.advance(task)
    header = [f"SiP-Ring at N = {GPUS:,} GPUs, B = {args.bandwidth:g} Gb/s ({round(args.bandwidth / 25)} "
              "wavelengths of 25 Gb/s, reach 16): the placer's best (k, l, global batch) for each retuning "
              "delay and estimation period, its iteration re-planned every period (the oracle's estimate).", "",
              "| model | period µs | retune µs | k × l, batch | iteration ms | time to accuracy min | dark share | "
              "searched in s |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    save_rows("replan_scale", rows, header, lambda r: (
        f"{r['model']} | {r['period_us']:g} | {r['reconfig_us']:g} | {r['k']} × {r['l']}, {r['global_batch']} | "
        f"{r['iteration_s'] * 1e3:.2f} | {r['time_to_accuracy_min']:.3f} | {r['dark_share']:.1%} | "
        f"{r['seconds']:.0f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

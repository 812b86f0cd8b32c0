"""Benchmark: placement speed, and the SiP-ML paper sweep with the oracle (N = 1,024 GPUs).

Writes bench/results/placer_sweep.json, docs/placer-sweep-table.md and docs/placer-sweep.png; with
`--setup paper`, the same sweep under the paper's own method (its compute model, efficiency: paper,
and its output-channel split, split_pairing: false) into bench/results/placer_sweep_paper.json.
Either run rewrites docs/sipml-claims.md from both files (each claim per model and bandwidth).
Run: `.venv/bin/python bench/placer_sweep.py [--setup paper]` (no root). Targets: placing the Transformer at k=16
under 10 s; the whole sweep under 10 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from rich.progress import Progress

from testbed.model.fabric_section import FabricSection
from testbed.placer.accuracy import curve
from testbed.placer.balance import balance
from testbed.placer.place import mp_radius, place_mp_group
from testbed.placer.profiles import device
from testbed.placer.settings import PlanSettings
from testbed.placer.zoo import MODELS
from testbed.planning.scenario_file import make_fabric
from testbed.workloads.model.search import PlanCache, search

HERE = Path(__file__).resolve().parent
BANDWIDTHS_GBPS = (128, 256, 512, 1024, 2048, 4096, 8192)
GPUS = 1024
# (the GPU's efficiency model, the plan settings) of each setup the sweep can run under
SETUPS = {"default": ("constant", PlanSettings()), "paper": ("paper", PlanSettings(pairing=False))}


def fabrics(bandwidth_gbps: float) -> dict[str, FabricSection]:
    common = dict(hosts=GPUS, gpu_bandwidth_gbps=bandwidth_gbps, latency_us=1)
    return {
        "Elect-Flat": make_fabric(kind="elect-flat", **common),
        "Elect-Flat (DP only)": make_fabric(kind="elect-flat", **common),
        "Elect-Cluster 400G": make_fabric(kind="elect-cluster", server_uplink_gbps=400, **common),
        "Elect-Cluster 200G": make_fabric(kind="elect-cluster", server_uplink_gbps=200, **common),
        "SiP-OCS": make_fabric(kind="sip-ocs", ocs_switches=16, **common),
        "SiP-Ring": make_fabric(kind="sip-ring", wavelengths=max(1, round(bandwidth_gbps / 25)), **common),
    }


def placement_timing() -> dict:
    graph = MODELS["transformer"]()
    started = time.monotonic()
    ops = balance(graph, device("v100"), 64, 16)
    place_mp_group(ops, 16, mp_radius(3, 16, 2))
    seconds = time.monotonic() - started
    return {"model": "transformer", "k": 16, "degree": 3, "sub_ops": sum(o.parts for o in ops), "seconds": seconds}


# Per worker process: placements are reused across bandwidths.
_CACHES: dict[tuple[str, str, str, PlanSettings], PlanCache] = {}


def plan_cache(model: str, device_name: str = "v100", efficiency: str = "constant",
               settings: PlanSettings = PlanSettings()) -> PlanCache:
    """This worker's placements of `model` under these assumptions, reused across fabrics and bandwidths."""
    key = (model, device_name, efficiency, settings)
    if key not in _CACHES:
        _CACHES[key] = PlanCache(MODELS[model](), device(device_name, efficiency), settings)
    return _CACHES[key]


def sweep_point(model: str, bandwidth: float, device_name: str = "v100",
                noise_batch: float | None = None, batches: list[int] | None = None,
                efficiency: str = "constant", settings: PlanSettings = PlanSettings()) -> list[dict]:
    """Every fabric's best (k, l, batch) for `model` at `bandwidth`; `device_name`, `noise_batch`
    (the accuracy curve's knee), `batches`, `efficiency` (the GPU's at small pieces) and the plan
    `settings` (DP buckets, spatial splits, split pairing, gradient precision) replace the
    defaults for sensitivity studies."""
    cache = plan_cache(model, device_name, efficiency, settings)
    accuracy = replace(curve(model), noise_batch=noise_batch) if noise_batch else None
    ks = [16, 32, 64] if model == "megatron" else None
    rows = []
    for name, fabric in fabrics(bandwidth).items():
        only_dp = name.endswith("(DP only)")
        if only_dp and model == "megatron":
            continue  # does not fit in one GPU: DP alone is infeasible
        choice = search(cache, GPUS, fabric, ks=[1] if only_dp else ks, batches=batches, accuracy=accuracy)
        rows.append({"model": model, "fabric": name, "gpu_bandwidth_gbps": bandwidth, "k": choice.k, "l": choice.l,
                     "global_batch": choice.global_batch, "iteration_ms": choice.iteration_s * 1e3,
                     "iterations": choice.iterations, "time_to_accuracy_min": choice.time_to_accuracy_s / 60})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="resnet50,transformer,megatron")
    parser.add_argument("--bandwidths", default=",".join(map(str, BANDWIDTHS_GBPS)))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--setup", choices=sorted(SETUPS), default="default",
                        help="paper: SiP-ML's compute model and output-channel split instead of ours")
    args = parser.parse_args()
    efficiency, settings = SETUPS[args.setup]
    timing = placement_timing()
    print(f"placement: transformer k=16, {timing['sub_ops']} sub-ops in {timing['seconds']:.2f} s")
    bandwidths = [float(b) for b in args.bandwidths.split(",")]
    models = args.models.split(",")
    rows = []
    started = time.monotonic()
    # Megatron's points are the slowest: queue them first so the two workers finish together.
    tasks = [(m, b) for m in sorted(models, key=lambda m: m != "megatron") for b in bandwidths]
    with ProcessPoolExecutor(max_workers=args.workers) as pool, Progress() as progress:
        task = progress.add_task("sweep", total=len(tasks))
        for found in [pool.submit(sweep_point, m, b, efficiency=efficiency, settings=settings) for m, b in tasks]:
            rows.extend(found.result())
            progress.advance(task)
    rows.sort(key=lambda r: (models.index(r["model"]), r["gpu_bandwidth_gbps"]))
    sweep_s = time.monotonic() - started
    print(f"sweep: {len(rows)} (model, fabric, bandwidth) points in {sweep_s:.0f} s")
    report = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "gpus": GPUS, "setup": args.setup,
              "placement": timing, "sweep_seconds": sweep_s, "rows": rows}
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    name = "placer_sweep.json" if args.setup == "default" else f"placer_sweep_{args.setup}.json"
    (results / name).write_text(json.dumps(report, indent=1) + "\n")
    from claims_report import write_claims_page, write_sweep_docs

    if args.setup == "default":
        write_sweep_docs(report, HERE.parent / "docs")
    if (results / "placer_sweep.json").exists() and (results / "placer_sweep_paper.json").exists():
        write_claims_page(json.loads((results / "placer_sweep.json").read_text()),
                          json.loads((results / "placer_sweep_paper.json").read_text()), HERE.parent / "docs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: which assumptions move SiP-ML's paper-scale claims, and by how much (N = 1,024 GPUs).

The oracle's placer sweep (bench/placer_sweep.py) re-runs for ResNet-50 and the Transformer over
per-GPU bandwidths 256 to 4,096 Gb/s with one assumption changed at a time, and the claims of
the source documents are recomputed from each variant, so a reader sees what each figure rests on. Megatron is
left out: its batch and iterations are fixed by the paper, so the accuracy knee does not touch it,
and each of its points costs minutes.

Writes bench/results/sensitivity.json and docs/sensitivity.md. Run: `.venv/bin/python
bench/sensitivity.py` (no root; about 15 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from claims_report import claims
from placer_sweep import GPUS, SETUPS, sweep_point
from replan_tables import replan_tables
from rich.progress import Progress

from testbed.placer.accuracy import curve
from testbed.placer.settings import PlanSettings

HERE = Path(__file__).resolve().parent
MODELS = ("resnet50", "transformer")
BANDWIDTHS_GBPS = (256, 512, 1024, 2048, 4096)



@dataclass(frozen=True)
class Variant:
    """One assumption changed from the baseline."""
    description: str
    device: str = "v100"
    knees: dict[str, float] = field(default_factory=dict)  # B_noise per model
    smallest_batch: int | None = None  # extra global batches below the accuracy curve's own
    efficiency: str = "constant"  # the GPU's throughput on small pieces (testbed/placer/profiles.py)
    # DP buckets, spatial splits, split pairing, gradient precision (testbed/placer/settings.py)
    settings: PlanSettings = PlanSettings()


PAPER_EFFICIENCY, PAPER_SETTINGS = SETUPS["paper"]  # placer_sweep.py --setup paper
VARIANTS = {
    "baseline": Variant("none: the constants of testbed/placer (V100; knees 65,536 and 2,048; batches from 1,024; "
                        "DP all-reduce in 25 MB buckets beside the backward pass; convolutions cut by rows or "
                        "channels, whichever moves fewer bytes)"),
    "transformer-knee-16384": Variant("Transformer knee at batch 16,384 (the constant before this release)",
                                      knees={"transformer": 16384}),
    "resnet-knee-8192": Variant("ResNet-50 knee at batch 8,192 instead of 65,536", knees={"resnet50": 8192}),
    "batch-floor-256": Variant("global batches from 256 (below one sample per GPU: MP plans only)",
                               smallest_batch=256),
    "no-overlap": Variant("DP all-reduce after the whole backward pass instead of in 25 MB buckets beside it",
                          settings=PlanSettings(bucket_bytes=0)),
    "a100": Variant("A100 instead of V100 (2.5× the compute, 2.3× the memory bandwidth)", device="a100"),
    "gemm-waves": Variant("a GEMM piece too small to fill the V100's 80 SMs with output tiles runs below the "
                          "large-GEMM rate (wave quantization) instead of at it", efficiency="waves"),
    "channel-splits-only": Variant("convolutions cut by channel only, never by rows (no spatial splits)",
                                   settings=PlanSettings(spatial=False)),
    "fp32-gradients": Variant("fp32 gradients in the DP all-reduce (4 bytes a parameter) instead of fp16",
                              settings=PlanSettings(gradient_precision="fp32")),
    "paper-compute": Variant("SiP-ML's compute model (§4.2): each op timed over the sample dimension at the local "
                             "batch (wave quantization), a model-parallel split dividing it linearly",
                             efficiency="paper"),
    "no-pairing": Variant("every weighted op cut by output channel, gathering its whole input (SiP-ML's split) "
                          "instead of Megatron's column/row pairs", settings=PlanSettings(pairing=False)),
    "paper-setup": Variant("both of the above: the paper's compute model and its split", efficiency=PAPER_EFFICIENCY,
                           settings=PAPER_SETTINGS),
    "paper-setup-fp32-knee-8192": Variant("the paper's setup with fp32 gradients and the ResNet-50 knee at 8,192",
                                          efficiency=PAPER_EFFICIENCY, knees={"resnet50": 8192},
                                          settings=replace(PAPER_SETTINGS, gradient_precision="fp32")),
}


def _point(variant: str, model: str, bandwidth: float) -> list[dict]:
    v = VARIANTS[variant]
    batches = None
    if v.smallest_batch:
        own = curve(model).batches
        batches = [b for b in (256, 512) if b >= v.smallest_batch and b < min(own)] + list(own)
    return [dict(row, variant=variant)
            for row in sweep_point(model, bandwidth, v.device, v.knees.get(model), batches, v.efficiency,
                                   v.settings)]


def _cluster_200g(rows: list[dict]) -> list[dict]:
    """The baseline's rows with Elect-Cluster's uplink at 200 Gb/s standing in for 400 Gb/s."""
    kept = [r for r in rows if r["fabric"] != "Elect-Cluster 400G"]
    return kept + [dict(r, fabric="Elect-Cluster 400G") for r in rows if r["fabric"] == "Elect-Cluster 200G"]


def write_page(report: dict, docs: Path) -> None:
    by_variant: dict[str, list[dict]] = {}
    for row in report["rows"]:
        by_variant.setdefault(row["variant"], []).append(row)
    tables = {name: dict(claims(by_variant[name])) for name in VARIANTS if name in by_variant}
    descriptions = {name: v.description for name, v in VARIANTS.items()}
    if "baseline" in by_variant:
        tables["cluster-200g"] = {claim: text.replace("Elect-Cluster 400G", "Elect-Cluster 200G")
                                  for claim, text in claims(_cluster_200g(by_variant["baseline"]))}
        descriptions["cluster-200g"] = "Elect-Cluster servers with a 200 Gb/s uplink instead of 400 Gb/s"
    claim_names = list(dict.fromkeys(c for table in tables.values() for c in table))
    lines = ["# What the paper-scale claims rest on", "",
             f"Generated by `bench/sensitivity.py` on {report['when'][:10]} in {report['seconds'] / 60:.0f} minutes: "
             f"the oracle's placer sweep at N = {GPUS:,} GPUs for {' and '.join(MODELS)} over per-GPU bandwidths "
             f"{', '.join(f'{b:g}' for b in report['bandwidths'])} Gb/s, with one assumption changed at a time"
             + (f" (this run: {', '.join(report['ran'])}; the other variants are from the run of "
                f"{report['kept_from'][:10]}). " if report.get("kept_from") else ". ") +
             "Megatron is left out (its batch and iterations are fixed by the paper, so the knee does not touch it, "
             "and each of its points costs minutes); the full sweep with it is docs/placer-sweep-table.md.", "",
             "Accuracy curves: " + "; ".join(f"{m} B_noise {curve(m).noise_batch:,.0f}" for m in MODELS) +
             " in the baseline (testbed/placer/accuracy.py says where they come from).", ""]
    for claim in claim_names:
        lines += [f"## {claim}", "", "| assumption changed | figure |", "| --- | --- |"]
        for name, table in tables.items():
            lines.append(f"| {descriptions[name]} | {table.get(claim, '—')} |")
        lines.append("")
    lines += replan_tables()
    (docs / "sensitivity.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="the variants to run; the last results of the others are kept")
    parser.add_argument("--bandwidths", default=",".join(map(str, BANDWIDTHS_GBPS)))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--page-only", action="store_true", help="rebuild docs/sensitivity.md from the last results")
    args = parser.parse_args()
    out = HERE / "results" / "sensitivity.json"
    if args.page_only:
        write_page(json.loads(out.read_text()), HERE.parent / "docs")
        return 0
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    bandwidths = [float(b) for b in args.bandwidths.split(",")]
    # A variant's points share a worker's placements only when they land on it: order by device and
    # model so that consecutive tasks reuse them, the transformer's (slowest) first.
    tasks = [(v, m, b) for v in sorted(variants, key=lambda v: VARIANTS[v].device) for m in reversed(MODELS)
             for b in bandwidths]
    rows: list[dict] = []
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.workers) as pool, Progress() as progress:
        task = progress.add_task("sensitivity", total=len(tasks))
        for found in [pool.submit(_point, *t) for t in tasks]:
            rows.extend(found.result())
            progress.advance(task)
    seconds = time.monotonic() - started
    report = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "gpus": GPUS,
              "bandwidths": bandwidths, "seconds": seconds, "rows": rows}
    if out.exists() and set(variants) != set(VARIANTS):
        kept = json.loads(out.read_text())
        if kept.get("bandwidths") == bandwidths:
            others = [r for r in kept["rows"] if r["variant"] not in variants and r["variant"] in VARIANTS]
            report["rows"] = others + rows
            report["ran"], report["kept_from"] = variants, kept.get("kept_from", kept["when"])
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    write_page(report, HERE.parent / "docs")
    print(f"sensitivity: {len(tasks)} (variant, model, bandwidth) points in {seconds:.0f} s; docs/sensitivity.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

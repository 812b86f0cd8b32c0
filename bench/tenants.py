"""Benchmark of several jobs on one fabric: each job's emulated iterations against its prediction
beside the others, and that prediction against the job's alone on the same fabric (what the
interference costs).

Cases: two ring all-reduces interleaved on a 16-GPU Elect-Cluster (every uplink shared), a placed
ResNet-50 beside a ring all-reduce on a 16-GPU SiP-Ring (re-planned every 100 µs for both), two
placed ResNet-50s on multi-shot SiP-OCS (8 GPUs, 4 switches), shared and partitioned (2 switches
a job). Run as root from the repository:
`.venv/bin/python bench/tenants.py [--only NAME,...]`. Writes bench/results/tenants.json and .md.
"""

from __future__ import annotations

import argparse
import sys
import time

from bench_results import cell, run_in_tempdir, save_rows

from testbed.planning.plan import predict_jobs, prepare
from testbed.planning.scenario_file import parse_scenario


def ring(size: int) -> dict:
    return {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "bytes": size, "iterations": 2}


def resnet(gpus: int) -> dict:
    return {"kind": "model", "model": {"name": "resnet50", "global_batch": 8 * gpus, "mp": 4, "dp": gpus // 4},
            "iterations": 2}


CASES = {
    "cluster-two-rings": (
        {"kind": "elect-cluster", "hosts": 16, "gpus_per_server": 4, "gpu_bandwidth_gbps": 100,
         "server_uplink_gbps": 100, "latency_us": 5},
        [{"name": "a", "gpus": [0, 1, 4, 5, 8, 9, 12, 13], "workload": ring(50_000_000)},
         {"name": "b", "gpus": 8, "workload": ring(50_000_000)}]),
    "ring-model-and-allreduce": (
        {"kind": "sip-ring", "hosts": 16, "gpu_bandwidth_gbps": 400, "latency_us": 5, "wavelengths": 16,
         "wavelength_gbps": 25, "neighbors": 8, "reconfig_us": 25, "estimate_period_us": 100},
        [{"name": "model", "gpus": 8, "workload": resnet(8)},
         {"name": "ring", "gpus": 8, "workload": ring(50_000_000)}]),
    "ocs-two-models": (
        {"kind": "sip-ocs", "hosts": 8, "gpu_bandwidth_gbps": 100, "latency_us": 5, "ocs_switches": 4,
         "reconfig_us": 200, "multi_shot": True},
        [{"name": "a", "gpus": 4, "workload": resnet(4)}, {"name": "b", "gpus": 4, "workload": resnet(4)}]),
    "ocs-two-models-partitioned": (
        {"kind": "sip-ocs", "hosts": 8, "gpu_bandwidth_gbps": 100, "latency_us": 5, "ocs_switches": 4,
         "reconfig_us": 200, "multi_shot": True},
        [{"name": "a", "gpus": 4, "workload": resnet(4)}, {"name": "b", "gpus": 4, "workload": resnet(4)}],
        "partitioned"),
}


def bench(name: str) -> list[dict]:
    fabric, jobs, *sharing = CASES[name]
    scenario = parse_scenario({"name": name, "seed": 1, "fabric": fabric, "jobs": jobs,
                               "job_sharing": sharing[0] if sharing else "shared",
                               "emulation": {"dilation": "auto"}}, name)
    started = time.monotonic()
    _, predicted = predict_jobs(scenario)
    result = run_in_tempdir(prepare(scenario))
    rows = []
    for job in predicted:
        measured = result.get("jobs", {}).get(job.name, {})
        ratios = measured.get("emulated_over_predicted", [])
        rows.append({"case": name, "job": job.name, "gpus": len(job.gpus), "together_s": job.together_s,
                     "alone_s": job.alone_s, "status": result["status"], "correct": result["sums_correct"],
                     "faithful": result["fidelity"]["ok"], "ratios": ratios,
                     "flagged": ", ".join(k for k, v in result["fidelity"]["monitors"].items() if not v["ok"]),
                     "dilation": result["dilation"], "wall_s": time.monotonic() - started})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated case names: " + ", ".join(CASES))
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case {unknown[0]}; choose from {', '.join(CASES)}", file=sys.stderr)
        return 2
    rows = []
    for name in names:
        for row in bench(name):
            rows.append(row)
            print(row, flush=True)
    header = ["Several jobs on one fabric: each job's prediction beside the others and alone, and its emulated "
              "iterations against the first (min / max).", "",
              "| case | job | GPUs | together ms | alone ms | together/alone | emulated/predicted | sums | faithful "
              "| dilation | wall s |",
              "| --- | --- | ---: | ---: | ---: | ---: | :---: | :---: | :---: | ---: | ---: |"]
    return save_rows("tenants", rows, header, lambda r: (
        f"{r['case']} | {r['job']} | {r['gpus']} | {r['together_s'] * 1e3:.2f} | {r['alone_s'] * 1e3:.2f} | "
        f"{r['together_s'] / r['alone_s']:.2f} | "
        f"{cell(min(r['ratios'], default=None))} / {cell(max(r['ratios'], default=None))} | "
        f"{'exact' if r['correct'] else 'WRONG'} | {'yes' if r['faithful'] else 'no (' + r['flagged'] + ')'} | "
        f"{r['dilation']:.0f} | {r['wall_s']:.0f}"))


if __name__ == "__main__":
    raise SystemExit(main())

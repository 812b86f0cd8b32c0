"""Benchmark: how long `predict` takes, and how much memory, for the placed models and the
large-model presets at 8 to 16,384 GPUs on Elect-Flat, Elect-Cluster, SiP-OCS and SiP-Ring, and
which method gave the figure (step-by-step simulation, the placer's estimate, the closed form).

Each prediction runs in its own process (its wall time and peak memory alone), stopped at
`--timeout` seconds. No root: `.venv/bin/python bench/oracle_scale.py [--gpus 64,128]
[--models transformer,gpt3-175b] [--fabrics sip-ring] [--timeout 60] [--name oracle_scale]`.
Writes bench/results/<name>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from bench_results import save_rows

GPUS = (8, 64, 128, 1024, 4096, 16384)
# 1 Tb/s a GPU, as the placer's examples; SiP-Ring as 40 wavelengths sharing B (25 Gb/s each at
# 1 Tb/s, 10 at the presets' 400 Gb/s) re-planned every 100 µs with 25 µs retunes, SiP-OCS as 8
# circuit switches re-planned between iterations.
FABRICS = {
    "elect-flat": {"kind": "elect-flat"},
    "elect-cluster": {"kind": "elect-cluster", "gpus_per_server": 8, "server_uplink_gbps": 3200},
    "sip-ocs": {"kind": "sip-ocs", "ocs_switches": 8, "reconfig_us": 25},
    "sip-ring": {"kind": "sip-ring", "wavelengths": 40, "reconfig_us": 25, "estimate_period_us": 100},
}
PLACED = ("resnet50", "transformer", "megatron")
PLACED_MP = {"megatron": 16}  # its 18 B parameters need 16 V100s a replica; the others take 8
# Large models as Megatron-LM lays them out: (preset overrides, tp, pp, ep); dp takes the rest,
# 8 micro-batches a replica, the optimizer's state sharded over dp and activations recomputed.
PRESETS = {
    "llama3-8b": ({}, 2, 1, 1),
    "llama3-70b": ({}, 8, 4, 1),
    "llama3-405b": ({}, 8, 16, 1),
    "gpt3-175b": ({}, 8, 8, 1),
    "mixtral-8x7b": ({}, 2, 4, 8),
    "deepseek-v3": ({"layers": 64}, 1, 16, 64),
}


def scenario(model: str, gpus: int, fabric: str) -> dict | str:
    """The scenario of one case, or why there is none at this many GPUs."""
    base = {"name": f"{model}-{gpus}-{fabric}", "seed": 1,
            "fabric": {"hosts": gpus, "gpu_bandwidth_gbps": 1000, "latency_us": 1, **FABRICS[fabric]}}
    if model in PLACED:
        mp = min(PLACED_MP.get(model, 8), gpus)
        return {**base, "workload": {"kind": "model", "model": {"name": model, "mp": mp, "dp": gpus // mp,
                                                                 "global_batch": 2 * gpus}}}
    overrides, tp, pp, ep = PRESETS[model]
    if gpus % (tp * pp) or (gpus // (tp * pp)) % ep:
        return f"needs a multiple of {tp * pp * ep} GPUs"
    dp = gpus // (tp * pp)
    return {**base, "fabric": {**base["fabric"], "gpu_bandwidth_gbps": 400},
            "workload": {"kind": "llm", "model": {"preset": model, **overrides},
                         "parallel": {"tp": tp, "pp": pp, "dp": dp, "ep": ep, "micro_batch": 1,
                                      "global_batch": 8 * dp, "sequence_parallel": tp > 1, "zero": 1},
                         "precision": "bf16", "device": "h100", "recompute": "full"}}


# The child process: predict, then say the method, the figure and the peak memory as one JSON line.
CHILD = """
import json, resource, sys
from testbed.model.errors import InputError
from testbed.planning.plan import plan
from testbed.planning.scenario_file import load_scenario
try:
    found = plan(load_scenario(sys.argv[1]))
    out = {"iteration_s": found.prediction.iteration_time_s, "method": found.method}
except InputError as e:
    out = {"refused": str(e)}
out["peak_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
print(json.dumps(out))
"""


def measure(model: str, gpus: int, fabric: str, timeout_s: float) -> dict:
    row: dict = {"model": model, "gpus": gpus, "fabric": fabric}
    made = scenario(model, gpus, fabric)
    if isinstance(made, str):
        return {**row, "status": "n/a", "note": made}
    with tempfile.TemporaryDirectory(prefix="testbed-oracle-scale-") as work:
        path = Path(work) / "scenario.yaml"
        path.write_text(yaml.safe_dump(made, sort_keys=False))
        started = time.monotonic()
        try:
            done = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {**row, "status": "timeout", "seconds": timeout_s, "note": f"over {timeout_s:g} s"}
        seconds = time.monotonic() - started
    if done.returncode != 0:
        return {**row, "status": "error", "seconds": seconds, "note": done.stderr.strip().splitlines()[-1][:160]}
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if "refused" in out:
        return {**row, "status": "refused", "seconds": seconds, "peak_gb": out["peak_gb"], "note": out["refused"][:160]}
    return {**row, "status": "predicted", "seconds": seconds, "peak_gb": out["peak_gb"],
            "iteration_ms": out["iteration_s"] * 1e3, "method": out["method"]}


def cells(row: dict) -> str:
    figures = (f"{row['iteration_ms']:.2f} | {row['method']}" if row["status"] == "predicted"
               else f"{row['status']} | {row.get('note', '')}")
    seconds = f"{row['seconds']:.1f}" if "seconds" in row else ""
    peak = f"{row['peak_gb']:.2f}" if "peak_gb" in row else ""
    return f"{row['model']} | {row['gpus']} | {row['fabric']} | {seconds} | {peak} | {figures}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", default=",".join(map(str, GPUS)))
    parser.add_argument("--models", default=",".join(PLACED + tuple(PRESETS)))
    parser.add_argument("--fabrics", default=",".join(FABRICS))
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--name", default="oracle_scale")
    args = parser.parse_args()
    rows = []
    for model in args.models.split(","):
        for gpus in map(int, args.gpus.split(",")):
            for fabric in args.fabrics.split(","):
                rows.append(measure(model, gpus, fabric, args.timeout))
                print(cells(rows[-1]), flush=True)
    header = [f"`predict` per case in its own process on this machine, stopped at {args.timeout:g} s "
              f"(1 Tb/s a GPU for placed models, 400 Gb/s for the presets; bench/oracle_scale.py).", "",
              "| model | GPUs | fabric | seconds | peak GB | iteration ms or status | method or why |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    save_rows(args.name, rows, header, cells)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: the llm kind's closed form against its step-by-step simulation on 8-32 GPUs, and
the source article's GPT-3 175B case (scenarios/gpt3-175b-article.yaml) on each fabric at 1,024 GPUs.

No root needed: `.venv/bin/python bench/llm_predictions.py`. Prints both tables and writes
bench/results/llm_closed_form.md and llm_article.md (with .json) beside this script.
`--moe`: mixtral-8x7b and the DeepSeek-V3-shaped preset on every fabric at 1,024 GPUs instead
(bench/results/llm_moe_article.md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bench_results import save_rows

from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import plan
from testbed.planning.scenario_file import load_scenario, parse_scenario
from testbed.workloads.llm.estimate import estimate
from testbed.workloads.llm.schedule import llm_schedule
from testbed.workloads.stepwise import simulated

ARTICLE = Path(__file__).resolve().parent.parent / "scenarios" / "gpt3-175b-article.yaml"
FABRICS = {
    "elect-flat": {},
    "elect-cluster": {"gpus_per_server": 4, "server_uplink_gbps": 400},
    "sip-ocs": {"ocs_switches": 4, "reconfig_us": 200},
    "sip-ring": {"wavelengths": 4, "wavelength_gbps": 100, "reconfig_us": 25, "estimate_period_us": 100},
}
MODEL = {"preset": "llama3-8b", "layers": 8, "hidden": 1024, "ffn_hidden": 3584, "heads": 8, "kv_heads": 8,
         "vocab": 8192, "seq_len": 1024}
SPLITS = [  # (tp, pp, dp, schedule, sequence parallel, zero, recompute)
    (2, 2, 2, "1f1b", False, 0, "none"), (2, 4, 2, "1f1b", True, 1, "selective"), (4, 2, 2, "gpipe", False, 0, "full"),
    (2, 2, 2, "interleaved", False, 0, "none"), (1, 4, 4, "1f1b", False, 0, "none"), (8, 1, 2, "1f1b", True, 0, "none"),
    (2, 2, 1, "1f1b", False, 0, "none"),
]
# The article's fabrics at Megatron-LM's 200 Gb/s a GPU (one HDR InfiniBand port each); Elect-Cluster
# as DGX A100 servers (NVLink inside, 8 × 200 Gb/s out), as the scenario ships.
ARTICLE_FABRICS = {
    "elect-cluster": {},
    "elect-flat": {"fabric.kind": "elect-flat", "fabric.gpu_bandwidth_gbps": 200},
    "sip-ocs": {"fabric.kind": "sip-ocs", "fabric.gpu_bandwidth_gbps": 200, "fabric.ocs_switches": 8},
    "sip-ring": {"fabric.kind": "sip-ring", "fabric.gpu_bandwidth_gbps": 200, "fabric.wavelengths": 8,
                 "fabric.wavelength_gbps": 25},
}


# Mixture-of-experts models on 1,024 H100s (400 Gb/s a GPU, ConnectX-7; NVLink's 450 GB/s a
# direction inside an 8-GPU server, 8 × 400 Gb/s out of it). Mixtral as tp 2 (sequence parallel) ×
# pp 4 × dp 128 with ep 8; the DeepSeek-V3-shaped model as its report's tp 1 × pp 16 with ep 64
# (on 1,024 GPUs, dp 64), its 61 layers made 64 so that 16 stages split them evenly, full
# recomputation. SiP-OCS needs 16 switches: a GPU talks to up to 11 others (ep 8, tp, dp, pp).
MOE_MODELS = {
    "mixtral-8x7b": ({"preset": "mixtral-8x7b"},
                     {"tp": 2, "pp": 4, "dp": 128, "ep": 8, "sequence_parallel": True, "micro_batch": 1,
                      "global_batch": 1024, "zero": 1}, "selective"),
    "deepseek-v3": ({"preset": "deepseek-v3", "layers": 64},
                    {"tp": 1, "pp": 16, "dp": 64, "ep": 64, "micro_batch": 1, "global_batch": 1536, "zero": 1}, "full"),
}
MOE_FABRICS = {
    "elect-flat": {"kind": "elect-flat"},
    "elect-cluster": {"kind": "elect-cluster", "gpus_per_server": 8, "gpu_bandwidth_gbps": 3600,
                      "server_uplink_gbps": 3200},
    "sip-ocs": {"kind": "sip-ocs", "ocs_switches": 16},
    "sip-ring": {"kind": "sip-ring", "wavelengths": 16, "wavelength_gbps": 25},
}


def moe_rows() -> list[dict]:
    rows = []
    for model_name, (model, parallel, recompute) in MOE_MODELS.items():
        for kind, fabric in MOE_FABRICS.items():
            scenario = parse_scenario({"name": model_name, "seed": 1,
                                       "fabric": {"hosts": 1024, "gpu_bandwidth_gbps": 400, "latency_us": 2, **fabric},
                                       "workload": {"kind": "llm", "model": model, "parallel": parallel,
                                                    "precision": "bf16", "device": "h100",
                                                    "recompute": recompute}}, "bench")
            started = time.monotonic()
            found = plan(scenario)
            traffic = found.traffic_bytes
            assert traffic is not None and found.gpu_memory is not None
            rows.append({"model": model_name, "fabric": kind, "iteration_s": found.prediction.iteration_time_s,
                         "breakdown": found.prediction.breakdown.describe(), "method": found.method,
                         "wire_tb": traffic.total() / 1e12, "ep_share": traffic.by_parallelism["ep"] / traffic.total(),
                         "memory_gb": found.gpu_memory.total() / 1e9, "wall_s": time.monotonic() - started,
                         "status": "ok", "correct": True})
            print(rows[-1], flush=True)
    return rows


def closed_form_rows() -> list[dict]:
    rows = []
    for kind, extra in FABRICS.items():
        for tp, pp, dp, schedule, sp, zero, recompute in SPLITS:
            chunks = {"virtual_stages": 2} if schedule == "interleaved" else {}
            parallel = {"tp": tp, "pp": pp, "dp": dp, "global_batch": 8 * dp, "schedule": schedule,
                        "sequence_parallel": sp, "zero": zero, **chunks}
            scenario = parse_scenario({"name": "split", "fabric": {"kind": kind, "hosts": tp * pp * dp,
                                                                  "gpu_bandwidth_gbps": 400, "latency_us": 2, **extra},
                                       "workload": {"kind": "llm", "model": MODEL, "parallel": parallel,
                                                    "recompute": recompute}}, "bench")
            started = time.monotonic()
            sim = simulated(scenario, llm_schedule(scenario.workload, scenario.fabric.hosts, "split")).prediction
            sim_s = time.monotonic() - started
            closed = estimate(scenario.workload, scenario.fabric)
            rows.append({"fabric": kind, "split": f"tp {tp} × pp {pp} × dp {dp} {schedule}"
                         + (" sp" if sp else "") + (f" zero {zero}" if zero else "") + f" recompute {recompute}",
                         "simulated_ms": sim.iteration_time_s * 1e3, "closed_form_ms": closed.iteration_time_s * 1e3,
                         "ratio": closed.iteration_time_s / sim.iteration_time_s, "simulation_s": sim_s,
                         "status": "ok", "correct": True})
            print(rows[-1], flush=True)
    return rows


def article_rows() -> list[dict]:
    rows = []
    for kind, overrides in ARTICLE_FABRICS.items():
        scenario = apply_overrides(load_scenario(ARTICLE), overrides)
        started = time.monotonic()
        found = plan(scenario)
        traffic = found.traffic_bytes
        rows.append({"fabric": kind, "iteration_s": found.prediction.iteration_time_s,
                     "breakdown": found.prediction.breakdown.describe(), "method": found.method,
                     "wire_tb": traffic.total() / 1e12 if traffic else None,
                     "allreduce_share": traffic.by_primitive["all-reduce"] / traffic.total() if traffic else None,
                     "wall_s": time.monotonic() - started, "status": "ok", "correct": True})
        print(rows[-1], flush=True)
    return rows


def main() -> int:
    if "--moe" in sys.argv[1:]:  # the mixture-of-experts table alone
        return save_moe()
    closed = closed_form_rows()
    worst = max(closed, key=lambda r: abs(r["ratio"] - 1))
    save_rows("llm_closed_form", closed, [
        "# The llm kind's closed form against its simulation (8-32 GPUs, 400 Gb/s a GPU)", "",
        f"Worst: {worst['ratio']:.3f} ({worst['fabric']}, {worst['split']}).", "",
        "| fabric | split | simulated (ms) | closed form (ms) | closed/simulated | simulation (s) |",
        "| --- | --- | --- | --- | --- | --- |"],
        lambda r: f"{r['fabric']} | {r['split']} | {r['simulated_ms']:.3f} | {r['closed_form_ms']:.3f} | "
                  f"{r['ratio']:.3f} | {r['simulation_s']:.1f}")
    return save_rows("llm_article", article_rows(), [
        "# GPT-3 175B, tp 8 × pp 8 × dp 16, batch 1,536, on 1,024 GPUs (scenarios/gpt3-175b-article.yaml)", "",
        "| fabric | iteration (s) | on the wire (TB) | all-reduce share | predict's wall time (s) | breakdown |",
        "| --- | --- | --- | --- | --- | --- |"],
        lambda r: f"{r['fabric']} | {r['iteration_s']:.2f} | {r['wire_tb']:.1f} | {r['allreduce_share']:.3f} | "
                  f"{r['wall_s']:.1f} | {r['breakdown']}")



def save_moe() -> int:
    rows = moe_rows()
    flat = {r["model"]: r["iteration_s"] for r in rows if r["fabric"] == "elect-flat"}
    return save_rows("llm_moe_article", rows, [
        "# Mixture of experts on 1,024 H100s at 400 Gb/s a GPU (bench/llm_predictions.py --moe)", "",
        "| model | fabric | iteration (s) | over Elect-Flat | on the wire (TB) | all-to-all share | memory (GB) | "
        "predict's wall time (s) | breakdown |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"],
        lambda r: f"{r['model']} | {r['fabric']} | {r['iteration_s']:.2f} | "
                  f"{r['iteration_s'] / flat[r['model']]:.2f} | {r['wire_tb']:.1f} | {r['ep_share']:.2f} | "
                  f"{r['memory_gb']:.1f} | {r['wall_s']:.1f} | {r['breakdown']}")


if __name__ == "__main__":
    raise SystemExit(main())

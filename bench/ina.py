"""Benchmark of in-network aggregation over Mininet.

1. Node throughput at 2, 4 and 8 workers: each configured per-worker rate (the `auto` rate, then
   2, 4 and 8 times it) against what the workers achieved, and the node's packets/s and Gb/s of
   input (emulated). Target (issue): at the rate `auto` picks, the node sustains ≥ 90% of it.
2. INA against ring all-reduce on the same ina fabric, at the same per-GPU bandwidth (the INA run
   reuses the ring run's dilation and byte scale), N = 4 and 8, beside the theoretical ratio
   n/(2(n−1)) and the oracle's (with α). Target: INA/ring within 10% of theory.
3. Emulated/predicted for every run.

Run as root: `.venv/bin/python bench/ina.py`. Writes bench/results/ina.{json,md} and
bench/results/ina_node.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench_results import cell, ratio_cells, run_in_tempdir, save_rows

from hosts.ina.protocol import FRAME_BYTES, PAYLOAD_BYTES
from testbed.core.shaping import MTU_FRAME_BYTES, TCP_PAYLOAD_BYTES
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD_SHARE = (PAYLOAD_BYTES / FRAME_BYTES) * (MTU_FRAME_BYTES / TCP_PAYLOAD_BYTES)


def execute(overrides: dict, iterations: int) -> dict:
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "ina-allreduce.yaml"),
                               {"workload.iterations": iterations, **overrides})
    return run_in_tempdir(prepare(scenario))


def summary(result: dict) -> dict:
    ratios = result["emulated_over_predicted"]
    return {"status": result["status"], "correct": result["sums_correct"], "faithful": result["fidelity"]["ok"],
            "emulated_ms": statistics.fmean(result["iteration_times_s"]) * 1e3 if ratios else None,
            "predicted_ms": result["predicted_iteration_time_s"] * 1e3,
            "ratio_min": min(ratios, default=None), "ratio_mean": statistics.fmean(ratios) if ratios else None,
            "ratio_max": max(ratios, default=None), "dilation": result["dilation"],
            "byte_scale": result["byte_scale"], "host_rate_mbps": result["host_rate_bps"] / 1e6}


def node_throughput(workers: int, iterations: int) -> list[dict]:
    rows = []
    base = execute({"fabric.hosts": workers}, iterations)
    for factor in (1, 2, 4, 8):
        result = base if factor == 1 else execute(
            {"fabric.hosts": workers, "emulation.dilation": base["dilation"],
             "emulation.byte_scale": base["byte_scale"] * factor}, iterations)
        achieved = result["fidelity"]["monitors"]["link_rate"]["value"] or 0.0
        payload_bps = result["host_rate_bps"] * PAYLOAD_SHARE * achieved
        packets_per_s = workers * payload_bps / (PAYLOAD_BYTES * 8)
        rows.append({**summary(result), "workers": workers, "rate_factor": factor,
                     "achieved_frac": achieved, "node_packets_per_s": packets_per_s,
                     "node_in_gbps": packets_per_s * FRAME_BYTES * 8 / 1e9,
                     "node_busy_frac": (result.get("ina") or {}).get("node", {}).get("busy_frac")})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def ina_against_ring(workers: int, iterations: int) -> dict:
    # Ring's `auto` needs the larger dilation (its messages are M/n); INA reuses it, so both run
    # at the same emulated per-GPU rate.
    ring = execute({"fabric.hosts": workers, "workload.algorithm": "ring"}, iterations)
    ina = execute({"fabric.hosts": workers, "emulation.dilation": ring["dilation"],
                   "emulation.byte_scale": ring["byte_scale"]}, iterations)
    measured = statistics.fmean(ina["iteration_times_s"]) / statistics.fmean(ring["iteration_times_s"])
    oracle = ina["predicted_iteration_time_s"] / ring["predicted_iteration_time_s"]
    row = {"workers": workers, "ina": summary(ina), "ring": summary(ring), "measured_ina_over_ring": measured,
           "oracle_ina_over_ring": oracle, "theory_ina_over_ring": workers / (2 * (workers - 1)),
           "error_vs_oracle": measured / oracle - 1}
    print(json.dumps(row), flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=3)
    args = parser.parse_args()
    node_rows = [row for n in (2, 4, 8) for row in node_throughput(n, args.iterations)]
    header = ["| workers | configured rate (Mb/s per worker) | achieved/configured | node input (packets/s) | "
              "node input (Gb/s, emulated) | node busy | emulated/predicted (min / mean / max) | result | faithful |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | :---: | :---: | :---: |"]
    code = save_rows("ina_node", node_rows, header, lambda r: (
        f"{r['workers']} | {cell(r['host_rate_mbps'])} | {cell(r['achieved_frac'])} | {r['node_packets_per_s']:.0f} | "
        f"{r['node_in_gbps']:.3f} | {cell(r['node_busy_frac'])} | {ratio_cells(r)}"))
    rows = []
    for n in (4, 8):
        row = ina_against_ring(n, args.iterations)
        for algorithm in ("ina", "ring"):
            rows.append({**row[algorithm], "case": f"{algorithm} N={n}", "workers": n,
                         "measured_ina_over_ring": row["measured_ina_over_ring"] if algorithm == "ina" else None,
                         "oracle_ina_over_ring": row["oracle_ina_over_ring"] if algorithm == "ina" else None,
                         "theory_ina_over_ring": row["theory_ina_over_ring"] if algorithm == "ina" else None,
                         "error_vs_oracle": row["error_vs_oracle"] if algorithm == "ina" else None})
    header = ["| case | emulated (ms) | predicted (ms) | INA/ring measured | INA/ring oracle (with α) | "
              "n/(2(n−1)) | emulated/predicted (min / mean / max) | result | faithful |",
              "| --- | ---: | ---: | ---: | ---: | ---: | :---: | :---: | :---: |"]
    code |= save_rows("ina", rows, header, lambda r: (
        f"{r['case']} | {cell(r['emulated_ms'])} | {cell(r['predicted_ms'])} | {cell(r['measured_ina_over_ring'])} | "
        f"{cell(r['oracle_ina_over_ring'])} | {cell(r['theory_ina_over_ring'])} | {ratio_cells(r)}"))
    return code


if __name__ == "__main__":
    raise SystemExit(main())

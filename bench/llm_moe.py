"""Benchmark: scenarios/llm-moe.yaml (a shortened Mixtral, pp 2 × dp 4 with its experts over ep 4,
8 emulated GPUs) on Elect-Flat, Elect-Cluster, multi-shot SiP-OCS and a re-planning SiP-Ring, with
even and skewed routing: emulated/predicted per iteration, sums, fidelity, wall time.

Run as root from the repository: `.venv/bin/python bench/llm_moe.py [--only elect-flat,...]`.
Prints each row and writes bench/results/llm_moe.json (and .md) beside this script.
"""

from __future__ import annotations

from pathlib import Path

from bench_results import run_fabric_bench

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "llm-moe.yaml"
SKEW = {"workload.model.routing_skew": 1.0}  # Zipf: the r-th most popular expert ∝ 1/r
FLAT = {"fabric.kind": "elect-flat"}
# Each fabric at 400 Gb/s per GPU, as bench/llm_dense.py sets them (the scenario ships on SiP-Ring).
FABRICS = {
    "elect-flat": FLAT,
    "elect-flat-skewed": {**FLAT, **SKEW},
    "elect-cluster": {"fabric.kind": "elect-cluster", "fabric.gpus_per_server": 4, "fabric.server_uplink_gbps": 400},
    "sip-ocs-multi-shot": {"fabric.kind": "sip-ocs", "fabric.ocs_switches": 4, "fabric.reconfig_us": 200,
                           "fabric.multi_shot": True},
    "sip-ring": {},
    "sip-ring-skewed": SKEW,
}


TITLE = ["# scenarios/llm-moe.yaml on every fabric (8 emulated GPUs, pp 2 × dp 4, ep 4, 1F1B)", "",
         "Rows ending in -skewed route by a Zipf law of exponent 1 (model.routing_skew: 1.0).", ""]


def main() -> int:
    return run_fabric_bench("llm_moe", __doc__ or "", FABRICS, lambda _row: SCENARIO, TITLE)


if __name__ == "__main__":
    raise SystemExit(main())

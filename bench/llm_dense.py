"""Benchmark: scenarios/llm-dense.yaml (tp × pp × dp with 1F1B on 8 emulated GPUs) on Elect-Flat,
Elect-Cluster, SiP-OCS (one plan, and multi-shot) and re-planning SiP-Ring, and scenarios/llm-ina.yaml
(tp × dp) on an ina fabric with its gradients summed by the node and by a ring: emulated/predicted
per iteration, sums, fidelity, wall time.

Run as root from the repository: `.venv/bin/python bench/llm_dense.py [--only elect-flat,...]`.
Prints each row and writes bench/results/llm_dense.json (and .md) beside this script.
"""

from __future__ import annotations

from pathlib import Path

from bench_results import run_fabric_bench

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
SCENARIO = SCENARIOS / "llm-dense.yaml"
# Each fabric at 400 Gb/s per GPU: Elect-Cluster's servers of 4 with a 400 Gb/s uplink each,
# SiP-OCS with 4 switches planned once from the iteration's traffic, and re-planned between phases
# (multi-shot), SiP-Ring with 4 wavelengths of 100 Gb/s re-planned every 100 µs.
FABRICS = {
    "elect-flat": {},
    "elect-cluster": {"fabric.kind": "elect-cluster", "fabric.gpus_per_server": 4, "fabric.server_uplink_gbps": 400},
    "sip-ocs": {"fabric.kind": "sip-ocs", "fabric.ocs_switches": 4, "fabric.reconfig_us": 200},
    "sip-ocs-multi-shot": {"fabric.kind": "sip-ocs", "fabric.ocs_switches": 4, "fabric.reconfig_us": 200,
                           "fabric.multi_shot": True},
    "sip-ring": {"fabric.kind": "sip-ring", "fabric.wavelengths": 4, "fabric.wavelength_gbps": 100,
                 "fabric.reconfig_us": 25, "fabric.estimate_period_us": 100},
    # scenarios/llm-ina.yaml (tp 2 × dp 4): the gradients through the aggregation node, and by a ring
    "ina": {},
    "ina-ring": {"workload.parallel.dp_algorithm": "ring"},
}


def scenario_of(row: str) -> Path:
    return SCENARIOS / "llm-ina.yaml" if row.startswith("ina") else SCENARIO


TITLE = ["# scenarios/llm-dense.yaml on every fabric (8 emulated GPUs, tp 2 × pp 2 × dp 2, 1F1B)", "",
         "The ina rows are scenarios/llm-ina.yaml (tp 2 × dp 4): gradients summed by the aggregation node "
         "(ina) and by a ring through it (ina-ring).", "",
         "Multi-shot SiP-OCS re-plans from the bytes each period measured. Predicted from the first "
         "iteration (the plan for the whole iteration's traffic, one retune) its runs measured 1.10-1.12; "
         "the prediction is now the steady iteration after one that ran, from the plan that one left "
         "in force, which retunes as the run does.", ""]


def main() -> int:
    return run_fabric_bench("llm_dense", __doc__ or "", FABRICS, scenario_of, TITLE)


if __name__ == "__main__":
    raise SystemExit(main())

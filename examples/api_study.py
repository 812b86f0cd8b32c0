"""A study from Python, as a notebook would drive one: the quickstart's all-reduce predicted on
four fabrics at several GPU bandwidths, SiP-ML's search for ResNet-50 on one of them, and (given a
sweep or run directory) its results as a DataFrame.

    .venv/bin/python examples/api_study.py [--sweep DIR] [--run DIR]

No root needed for predictions; runs and sweeps come from `testbed run` / `testbed sweep`."""

from __future__ import annotations

import argparse
import sys

import testbed
from testbed.model.errors import TestbedError

FABRICS = {
    "elect-flat": {"kind": "elect-flat"},
    "elect-cluster": {"kind": "elect-cluster", "gpus_per_server": 4, "server_uplink_gbps": 100},
    "sip-ocs": {"kind": "sip-ocs", "ocs_switches": 4},
    "sip-ring": {"kind": "sip-ring", "wavelengths": 4},
}


def scenario(fabric: dict, gbps: float, workload: dict) -> dict:
    extra = {"wavelength_gbps": gbps / 4} if fabric["kind"] == "sip-ring" else {}
    return {"name": "study", "fabric": {**fabric, "hosts": 8, "gpu_bandwidth_gbps": gbps, "latency_us": 5, **extra},
            "workload": workload}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", help="a sweep directory to load")
    parser.add_argument("--run", help="a run directory to load")
    args = parser.parse_args(argv)
    allreduce = {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "bytes": 100_000_000}
    print(f"{'fabric':14} " + " ".join(f"{g:>9} Gb/s" for g in (100, 400, 1600)))
    for name, fabric in FABRICS.items():
        times = [testbed.predict(testbed.load_scenario(scenario(fabric, g, allreduce))).iteration_time_s
                 for g in (100, 400, 1600)]
        print(f"{name:14} " + " ".join(f"{t * 1e3:11.3f} ms" for t in times))
    resnet = {"kind": "model", "model": {"name": "resnet50", "global_batch": 64, "mp": 4, "dp": 2}}
    for rank, choice in enumerate(testbed.search(testbed.load_scenario(scenario(FABRICS["sip-ring"], 400, resnet)),
                                                 top=3), start=1):
        print(f"search #{rank}: mp {choice.k} dp {choice.l} batch {choice.global_batch}: "
              f"{choice.iteration_s * 1e3:.3f} ms an iteration, {choice.time_to_accuracy_s / 60:.1f} min to accuracy")
    if args.sweep:
        print(testbed.load_sweep(args.sweep).to_string(max_rows=20))
    if args.run:
        print(testbed.load_run(args.run).to_string())
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except TestbedError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)

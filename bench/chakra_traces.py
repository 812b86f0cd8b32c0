"""Benchmark: Chakra traces as the ecosystem writes them, predicted and emulated.

Every kind examples/astra_sim_traces.py writes with MLCommons' mlc-chakra (its generator's
collectives, the other collective types, a send/recv ring all-reduce, ASTRA-sim's custom-collective
layout), 1 MiB as ASTRA-sim's examples, on Elect-Flat (100 Gb/s, α 5 µs) and on SiP-Ring (4
wavelengths of 25 Gb/s, the same α): the prediction against the hand alpha-beta time (Elect-Flat,
and SiP-Ring where the ring's constraints alone give it), and every emulated iteration against the
prediction.

Run as root from the repository: `.venv/bin/python bench/chakra_traces.py [--ranks 8,16]
[--fabrics elect-flat,sip-ring] [--only allreduce,gather] [--name chakra_traces]`. Writes
bench/results/<name>.json (and .md).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench_results import ratio_cells, run_in_tempdir, run_summary, save_rows
from stepwise_hand import pairwise_alltoall_s

from testbed.fabrics.sip_ring.behaviour import ring_plan
from testbed.fabrics.sip_ring.section import SipRingFabric
from testbed.model.schedule import Schedule
from testbed.model.units import gbps_to_bps, us_to_s
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import parse_scenario

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import astra_sim_traces  # noqa: E402  (examples/astra_sim_traces.py)

SIZE = 1_048_576
FABRICS = {
    "elect-flat": {"kind": "elect-flat", "gpu_bandwidth_gbps": 100, "latency_us": 5},
    "sip-ring": {"kind": "sip-ring", "gpu_bandwidth_gbps": 100, "latency_us": 5, "wavelengths": 4,
                 "wavelength_gbps": 25, "reconfig_us": 25, "estimate_period_us": 100},
}


# SiP-Ring's hand times where they follow from the ring's constraints alone. Kinds whose messages
# go to the next GPU only: the plan keeps one wavelength towards the other neighbour (the ring
# stays connected), so the one-way ring gets W - 1 of W (B·(W-1)/W). A binomial reduce or
# broadcast rooted at 0 on 8 GPUs: its 4-hop round puts four lightpaths on one segment, which has
# W - 1 = 3 wavelengths beside the kept ring's, so one flow relays over another's single
# wavelength w = B/W (2M/w); the two later rounds each have a wavelength of their own:
# 3α + 4M/w.
SIP_RING_RING_KINDS = ("allreduce", "allgather", "reducescatter", "reduce_scatter_block", "sendrecv_ring",
                       "custom_ring", "barrier")

# The other kinds' times depend on which pairs the planner gives lightpaths: each hand time below
# was worked out (docs/chakra-hand-times.md) on the plan it lists, the lightpaths beyond the ring
# neighbours', with the relay rule (shortest path over lightpaths, ties to the lowest-numbered next
# hop), max-min sharing of a lightpath and the stepwise rule (a message moves once both ends reach
# its exchange; a rank moves on α after its exchange is delivered). The bench reports the hand time
# only when the planner's plan is the one listed. (kind, GPUs) -> (lightpaths, α count, M/w count).
PLANNED_HAND: dict[tuple[str, int], tuple[frozenset[tuple[int, int]], int, float]] = {
    ("gather", 8): (frozenset({(2, 0), (3, 0)}), 1, 3 / 8),  # 3→0 carries 3, 4, 5's M/8
    ("scatter", 8): (frozenset({(0, 2), (0, 3)}), 1, 3 / 8),  # 0→3 carries 3, 4, 5's
    ("gather", 16): (frozenset({(2, 0), (3, 0)}), 1, 7 / 16),  # 3→0 carries 3 to 9's M/16
    ("scatter", 16): (frozenset({(0, 2), (0, 3)}), 1, 7 / 16),
    ("alltoall", 8): (frozenset({(0, 2), (0, 3), (1, 3), (1, 6), (2, 0), (2, 4), (3, 0), (3, 1), (4, 2), (4, 6),
                                 (5, 1), (5, 7), (6, 4), (7, 5)}), 7, 11 / 8),
    ("reduce", 16): (frozenset({(2, 0), (3, 1), (4, 0), (6, 2), (7, 3), (9, 1), (10, 2), (11, 3)}), 4, 8),
    ("broadcast", 16): (frozenset({(0, 2), (0, 4), (1, 3), (2, 6), (3, 7), (4, 12), (6, 14), (7, 15)}), 4, 7),
}


def plan_lightpaths(fabric: SipRingFabric, schedule: Schedule) -> dict[tuple[int, int], int]:
    """The planner's lightpaths for this schedule's traffic: pair -> wavelengths."""
    traffic = schedule.traffic()
    plan = ring_plan(fabric, fabric.hosts, traffic, tuple(sorted(traffic)))
    return {pair: len(path.wavelengths) for pair, path in plan.lightpaths.items()}


def extra_lightpaths(lightpaths: dict[tuple[int, int], int], n: int) -> frozenset[tuple[int, int]]:
    """The pairs with lightpaths, ring neighbours aside."""
    return frozenset(p for p in lightpaths if (p[1] - p[0]) % n not in (1, n - 1))


def sip_ring_hand_s(kind: str, hand, ranks: int, size: int, alpha_s: float, b_bps: float, w: int,
                    lightpaths: dict[tuple[int, int], int]) -> float | None:
    if kind in SIP_RING_RING_KINDS:
        return hand(ranks, size, alpha_s, b_bps * (w - 1) / w)
    if kind in ("reduce", "broadcast") and ranks == 8 and w == 4:
        return 3 * alpha_s + 4 * size * 8 / (b_bps / w)
    planned = extra_lightpaths(lightpaths, ranks)
    if kind == "alltoall" and (kind, ranks) not in PLANNED_HAND:
        # Too many relayed pairs to work on paper (179 at 16 GPUs): the same rules applied
        # mechanically (bench/stepwise_hand.py, which reproduces the 8-GPU table).
        return pairwise_alltoall_s(ranks, size, alpha_s, b_bps / w, lightpaths)
    listed = PLANNED_HAND.get((kind, ranks))
    if listed is None or w != 4 or planned != listed[0]:
        return None
    _, alphas, units = listed
    return alphas * alpha_s + units * size * 8 / (b_bps / w)


def run_one(kind: str, directory: Path, hand, fabric_name: str, ranks: int) -> dict:
    fabric = {**FABRICS[fabric_name], "hosts": ranks}
    scenario = parse_scenario({"name": f"{kind}-{ranks}", "fabric": fabric,
                               "workload": {"kind": "chakra", "path": str(directory), "iterations": 3}}, kind)
    started = time.monotonic()
    prepared = prepare(scenario)
    predicted_s = prepared.prediction.iteration_time_s
    alpha_s, b_bps = us_to_s(fabric["latency_us"]), gbps_to_bps(fabric["gpu_bandwidth_gbps"])
    if fabric_name == "elect-flat":
        hand_s = hand(ranks, SIZE, alpha_s, b_bps)
    else:
        assert isinstance(scenario.fabric, SipRingFabric)
        hand_s = sip_ring_hand_s(kind, hand, ranks, SIZE, alpha_s, b_bps, fabric["wavelengths"],
                                 plan_lightpaths(scenario.fabric, prepared.schedule))
    result = run_in_tempdir(prepared)
    return {"kind": kind, "fabric": fabric_name, "ranks": ranks, "predicted_ms": predicted_s * 1e3,
            "hand_ms": None if hand_s is None else hand_s * 1e3,
            "predicted_over_hand": None if hand_s is None else predicted_s / hand_s,
            **run_summary(result), "error": result.get("error"), "wall_s": time.monotonic() - started}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="8,16")
    parser.add_argument("--fabrics", default="elect-flat,sip-ring")
    parser.add_argument("--only", help="comma-separated kinds (default: every kind)")
    parser.add_argument("--name", default="chakra_traces", help="results file name in bench/results")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="testbed-traces-") as work:
        for ranks in map(int, args.ranks.split(",")):
            made = astra_sim_traces.write_all(Path(work) / str(ranks), ranks, SIZE)
            for fabric_name in args.fabrics.split(","):
                for kind, (directory, hand) in made.items():
                    if args.only and kind not in args.only.split(","):
                        continue
                    row = run_one(kind, directory, hand, fabric_name, ranks)
                    print(row, flush=True)
                    rows.append(row)
                    if row["status"] == "interrupted":  # Ctrl-C ends the bench, not just this run
                        return 130
    header = ["| trace | fabric | GPUs | predicted (ms) | hand (ms) | emulated/predicted (min / mean / max) | sums "
              "| faithful | wall (s) |",
              "| --- | --- | ---: | ---: | ---: | :---: | :---: | :---: | ---: |"]
    return save_rows(args.name, rows, header, lambda r: (
        f"{r['kind']} | {r['fabric']} | {r['ranks']} | {r['predicted_ms']:.3f} | "
        f"{'n/a' if r['hand_ms'] is None else format(r['hand_ms'], '.3f')} | {ratio_cells(r)}"
        f"{' (' + r['flagged'] + ')' if r['flagged'] else ''} | {r['wall_s']:.0f}"))


if __name__ == "__main__":
    raise SystemExit(main())

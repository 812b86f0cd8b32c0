"""Benchmark of scale on one machine: ring all-reduce of 100 MB on Elect-Flat at 8 to 128 GPUs and
on SiP-OCS and SiP-Ring at 8 to 64, each point a whole run: set-up seconds (network built, fabric
programmed, agents started), wall seconds, dilation, emulated/predicted, the fidelity monitors,
the machine's CPU, and the memory of the runner, of each host's agent, of Open vSwitch and of
the controller (sampled every half second).

Run as root from the repository: `.venv/bin/python bench/scale.py [--only elect-flat] [--hosts 8,16]`.
Prints a table and writes bench/results/scale.json and scale.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import threading
import time
from pathlib import Path

from bench_results import RESULTS, flagged_monitors, run_in_tempdir, save_rows

from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE.parent / "scenarios"
CASES = {"elect-flat": ("quickstart", [8, 16, 32, 64, 128]),
         "sip-ocs": ("ocs-allreduce", [8, 16, 32, 64]),
         "sip-ring": ("ring-allreduce", [8, 16, 32, 64])}
AGENT, OVS, CONTROLLER = "hosts.agent", "ovs-vswitchd", "controller.launch"


def _rss_by_kind() -> dict[str, list[int]]:
    """Resident memory (bytes) of every agent, Open vSwitch and controller process now."""
    found: dict[str, list[int]] = {AGENT: [], OVS: [], CONTROLLER: []}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            kind = next((k for k in found if k in cmdline), None)
            if kind is None:
                continue
            status = (entry / "status").read_text()
        except OSError:
            continue
        rss = next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        found[kind].append(rss)
    return found


class MemorySampler(threading.Thread):
    """Peak memory of the processes a run starts, sampled until stopped."""

    def __init__(self, period_s: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.period_s, self.done = period_s, threading.Event()
        self.agent_peak, self.agents_total_peak, self.ovs_peak, self.controller_peak = 0, 0, 0, 0

    def run(self) -> None:
        while not self.done.wait(self.period_s):
            now = _rss_by_kind()
            if now[AGENT]:
                self.agent_peak = max(self.agent_peak, max(now[AGENT]))
                self.agents_total_peak = max(self.agents_total_peak, sum(now[AGENT]))
            self.ovs_peak = max(self.ovs_peak, sum(now[OVS]))
            self.controller_peak = max(self.controller_peak, sum(now[CONTROLLER]))


def run_point(kind: str, hosts: int) -> dict:
    name, _ = CASES[kind]
    base = load_scenario(SCENARIOS / f"{name}.yaml")
    scenario = apply_overrides(base, {"fabric.hosts": hosts, "name": f"scale-{kind}-{hosts}"})
    sampler = MemorySampler()
    sampler.start()
    started = time.monotonic()
    result = run_in_tempdir(prepare(scenario))
    wall_s = time.monotonic() - started
    sampler.done.set()
    sampler.join()
    ratios = result["emulated_over_predicted"]
    timings = result.get("timings_s", {})
    row = {
        "fabric": kind, "hosts": hosts, "status": result["status"], "error": result.get("error"),
        "correct": result["sums_correct"], "faithful": result["fidelity"]["ok"],
        "flagged": flagged_monitors(result),
        "ratio_min": min(ratios) if ratios else None, "ratio_mean": statistics.fmean(ratios) if ratios else None,
        "ratio_max": max(ratios) if ratios else None,
        "dilation": result["dilation"], "host_rate_mbps": result["host_rate_bps"] / 1e6,
        "network_built_s": timings.get("network_built_s"), "fabric_programmed_s": timings.get("fabric_programmed_s"),
        "agents_started_s": timings.get("agents_started_s"), "torn_down_s": timings.get("torn_down_s"),
        "wall_s": wall_s, "cpu_busy_frac": result["fidelity"]["monitors"].get("cpu", {}).get("value"),
        "tcp_timeouts": sum(result.get("iteration_tcp_timeouts") or []),
        "runner_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "agent_peak_mb": sampler.agent_peak / 2**20, "agents_total_peak_mb": sampler.agents_total_peak / 2**20,
        "ovs_peak_mb": sampler.ovs_peak / 2**20, "controller_peak_mb": sampler.controller_peak / 2**20,
    }
    print({k: v for k, v in row.items() if k != "error"} | ({"error": row["error"]} if row["error"] else {}),
          flush=True)
    return row


def _cells(r: dict) -> str:
    fmt = lambda v, spec=".2f": "n/a" if v is None else format(v, spec)  # noqa: E731
    ratio = "n/a" if r["ratio_min"] is None else \
        f"{r['ratio_min']:.3f} / {r['ratio_mean']:.3f} / {r['ratio_max']:.3f}"
    verdict = "yes" if r["faithful"] else f"no ({r['flagged'] or r['status']})"
    return (f"{r['fabric']} | {r['hosts']} | {ratio} | {'exact' if r['correct'] else 'WRONG'} | {verdict} | "
            f"{r['dilation']:.0f} | {r['host_rate_mbps']:.1f} | {fmt(r['network_built_s'], '.1f')} | "
            f"{fmt(r['fabric_programmed_s'], '.1f')} | {fmt(r['agents_started_s'], '.1f')} | {r['wall_s']:.0f} | "
            f"{fmt(r['cpu_busy_frac'])} | {r['tcp_timeouts']} | {r['runner_peak_mb']:.0f} | "
            f"{r['agent_peak_mb']:.0f} | {r['agents_total_peak_mb']:.0f} | {r['ovs_peak_mb']:.0f} | "
            f"{r['controller_peak_mb']:.0f}")


HEADER = ["| fabric | GPUs | emulated/predicted (min / mean / max) | sums | faithful | dilation | Mb/s per host "
          "| network built (s) | fabric programmed (s) | agents started (s) | wall (s) | CPU busy | TCP timeouts "
          "| runner peak (MB) | agent peak (MB) | all agents (MB) | OVS (MB) | controller (MB) |",
          "| --- | ---: | :---: | :---: | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
          "| ---: | ---: | ---: | ---: |"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=sorted(CASES), action="append", help="one fabric (repeatable)")
    parser.add_argument("--hosts", help="comma-separated GPU counts instead of each fabric's own")
    args = parser.parse_args()
    rows = []
    for kind in args.only or list(CASES):
        counts = [int(h) for h in args.hosts.split(",")] if args.hosts else CASES[kind][1]
        rows += [run_point(kind, hosts) for hosts in counts]
    earlier = RESULTS / "scale.json"
    if earlier.exists():  # points not measured now keep their last measurement
        measured = {(r["fabric"], r["hosts"]) for r in rows}
        rows += [r for r in json.loads(earlier.read_text())["rows"] if (r["fabric"], r["hosts"]) not in measured]
    order = list(CASES)
    rows.sort(key=lambda r: (order.index(r["fabric"]), r["hosts"]))
    return save_rows("scale", rows, HEADER, _cells)


if __name__ == "__main__":
    raise SystemExit(main())

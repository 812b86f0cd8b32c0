"""Benchmark of the reconfigurable fabrics: dark-time accuracy and controller latency measured by
probes at the dilation each scenario uses; the dark time of every reconfiguration in runs that
re-plan each period (SiP-Ring ring all-reduce and SiP-OCS multi-shot placed ResNet-50, each at 8,
16 and 32 GPUs); and emulated/predicted iteration time of ring all-reduce and a placed schedule
on every emulated fabric at 8 and 16 GPUs.

Run as root from the repository: `.venv/bin/python bench/optical.py [--quick]`. Prints tables and
writes bench/results/optical.json and optical.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from bench_results import flagged_monitors, run_in_tempdir
from probes import optical_fabric, probe

from testbed.emulation.run import Runner
from testbed.fabrics.timing import reconfig_us
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE.parent / "scenarios"
FABRIC_SCENARIOS = {"elect-flat": "quickstart", "elect-cluster": "cluster-allreduce",
                    "sip-ocs": "ocs-allreduce", "sip-ring": "ring-allreduce"}


def dark_accuracy(kind: str, delays_us: list[float], repeats: int) -> list[dict]:
    """Probe-measured dark time of reconfigurations at the scenario's own dilation."""
    scenario = load_scenario(SCENARIOS / f"{FABRIC_SCENARIOS[kind]}.yaml")
    prepared = prepare(scenario)
    dilation, rate = prepared.plan.dilation.dilation, prepared.plan.host_rate_bps
    n = 4
    fabric = scenario.fabric.model_copy(update={"hosts": n, **({"ocs_switches": 1} if kind == "sip-ocs" else {})})
    rows = []
    with tempfile.TemporaryDirectory(prefix="testbed-bench-") as work:
        work_dir = Path(work)
        ring_links = [(i, (i + 1) % n, 1) for i in range(n)] + [((i + 1) % n, i, 1) for i in range(n)]
        traffic = [[0] * n for _ in range(n)]
        if kind == "sip-ocs":
            for i in range(n):
                traffic[i][(i + 1) % n] = 1
        with optical_fabric(fabric, rate, work_dir, traffic, dilation=dilation) as (live, api):
            if kind == "sip-ring":
                api.wait_for(api.set_lightpaths(ring_links))
            for delay in delays_us:
                api.settings(reconfig_us=delay)
                configured = delay * 1e-6 * dilation
                for _ in range(repeats):
                    asked: list = []
                    if kind == "sip-ocs":  # reverse the ring: no circuit survives, GPU 0 → 1 is dark
                        forward = [(0, i, (i + 1) % n) for i in range(n)]
                        backward = [(0, (i + 1) % n, i) for i in range(n)]
                        api.wait_for(api.set_circuits(forward))
                        change = lambda: asked.extend([time.monotonic(), api.set_circuits(backward)])  # noqa: E731
                    else:  # a new lightpath 0 → 2: relayed until its wavelength is tuned
                        api.wait_for(api.set_lightpaths(ring_links))
                        change = lambda: asked.extend([time.monotonic(), api.set_lightpaths(ring_links + [(0, 2, 1)])])  # noqa: E731
                    duration = max(0.5, 4 * configured)
                    result = probe(live, 0, 1 if kind == "sip-ocs" else 2, work_dir, duration_s=duration,
                                   interval_s=max(2e-4, configured / 200), during=change,
                                   during_at_s=duration / 4)
                    event = api.wait_for(asked[1])
                    if kind == "sip-ocs":
                        gap, before, after = result.largest_gap()
                        measured = gap
                        first = after
                    else:
                        hit = result.first_with_hops(1, after_s=asked[0])
                        first = hit["arrived"] if hit else float("nan")
                        measured = first - event["dark_start_s"]
                    rows.append({"fabric": kind, "dilation": dilation, "reconfig_us": delay,
                                 "configured_s": configured, "probe_dark_s": measured,
                                 "probe_over_configured": measured / configured,
                                 "controller_dark_s": event["measured_dark_s"],
                                 "latency_to_first_packet_s": first - asked[0] - configured})
    return rows


def replanning_dark(cases: list[tuple[str, int]]) -> list[dict]:
    """Dark time of every reconfiguration in whole runs where the controller re-plans each period
    (the placed ResNet-50 on SiP-Ring and multi-shot SiP-OCS, whose phases make re-plans worth their
    dark time; a ring all-reduce's traffic does not change, so it keeps its lightpaths), as the
    hosts applied it, against the configured."""
    rows = []
    for name, hosts in cases:
        overrides: dict = {"fabric.hosts": hosts, "name": f"{name}-{hosts}"}
        if name in ("ocs-multishot", "placed-resnet-ring"):  # the placed ResNet-50 stays 2-way MP; DP grows
            overrides["workload.model.dp"] = hosts // 2
        scenario = apply_overrides(load_scenario(SCENARIOS / f"{name}.yaml"), overrides)
        with tempfile.TemporaryDirectory(prefix="testbed-bench-") as work:
            run_dir = Path(work) / "run"
            started = time.monotonic()
            result = Runner(prepare(scenario), run_dir).execute()
            wall = time.monotonic() - started
            events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line]
        ratios = [e["measured_dark_s"] / e["configured_dark_s"] for e in events
                  if e.get("kind") == "reconfiguration" and e["configured_dark_s"] > 0]
        rows.append({"scenario": name, "fabric": scenario.fabric.kind, "hosts": hosts, "status": result["status"],
                     "reconfigurations": len(ratios), "dilation": result["dilation"],
                     "real_dark_us": reconfig_us(scenario.fabric),
                     "dark_mean": statistics.mean(ratios) if ratios else None,
                     "dark_min": min(ratios, default=None), "dark_max": max(ratios, default=None),
                     "worst_deviation": max((abs(r - 1) for r in ratios), default=None),
                     "faithful": result["fidelity"]["ok"], "flagged": flagged_monitors(result), "wall_s": wall,
                     "ratio_mean": statistics.mean(result["emulated_over_predicted"])
                     if result["emulated_over_predicted"] else None})
    return rows


def _replanning_cell(r: dict) -> str:
    if r["dark_mean"] is None:
        return f"no reconfigurations ({r['status']})"
    return f"{r['dark_mean']:.3f} | {r['dark_min']:.3f}-{r['dark_max']:.3f} | {r['worst_deviation']:.1%}"


def _ratio_cell(row: dict) -> str:
    return "n/a" if row.get("ratio_mean") is None else f"{row['ratio_mean']:.3f}"


def _faithful_cell(row: dict) -> str:
    return "yes" if row["faithful"] else f"no: {row.get('flagged', '')}"


def iteration_ratios(kind: str, hosts: list[int], placed: bool) -> list[dict]:
    rows = []
    base = load_scenario(SCENARIOS / f"{FABRIC_SCENARIOS[kind]}.yaml")
    for n in hosts:
        overrides = {"fabric.hosts": n, "name": f"{base.name}-{n}"}
        if kind == "elect-cluster":
            overrides["fabric.gpus_per_server"] = n // 2
        cases = [("ring all-reduce", apply_overrides(base, overrides))]
        if placed:  # the placed ResNet-50 example widened to n GPUs: 2-way MP × n/2-way DP
            resnet = load_scenario(SCENARIOS / "placed-resnet.yaml")
            fabric = base.fabric.model_dump(exclude_unset=True)
            fabric.update(hosts=n, gpu_bandwidth_gbps=resnet.fabric.gpu_bandwidth_gbps)
            if kind == "elect-cluster":
                fabric["gpus_per_server"] = n // 2
            model = resnet.workload.model.model_copy(update={"dp": n // 2, "global_batch": 4 * n})
            workload = resnet.workload.model_copy(update={"model": model})
            cases.append(("placed ResNet-50", resnet.model_copy(update={
                "fabric": type(base.fabric)(**fabric), "workload": workload, "name": f"placed-resnet-{kind}-{n}"})))
        for label, scenario in cases:
            started = time.monotonic()
            result = run_in_tempdir(prepare(scenario))
            wall = time.monotonic() - started
            ratios = result["emulated_over_predicted"]
            rows.append({"fabric": kind, "workload": label, "hosts": scenario.fabric.hosts, "status": result["status"],
                         "error": result["error"], "ratio_min": min(ratios, default=None),
                         "ratio_mean": statistics.mean(ratios) if ratios else None,
                         "ratio_max": max(ratios, default=None), "sums_correct": result["sums_correct"],
                         "faithful": result["fidelity"]["ok"], "flagged": flagged_monitors(result),
                         "dilation": result["dilation"],
                         "reconfigurations": result.get("reconfigurations", 0), "wall_s": wall})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="8 GPUs only, one repeat, no placed schedules")
    parser.add_argument("--only", choices=["dark", "replanning", "runs"], help="run one part of the benchmark")
    args = parser.parse_args()
    hosts = [8] if args.quick else [8, 16]
    repeats = 1 if args.quick else 3
    dark = [] if args.only in ("runs", "replanning") else \
        dark_accuracy("sip-ring", [25, 50, 100], repeats) + dark_accuracy("sip-ocs", [1000, 10000], repeats)
    replanning = [] if args.only in ("runs", "dark") else replanning_dark(
        [(name, n) for name in ("placed-resnet-ring", "ocs-multishot") for n in ([8] if args.quick else [8, 16, 32])])
    print(f"{'fabric':9} {'reconfig µs':>11} {'dilation':>8} {'probe/configured':>17} {'controller/configured':>22} "
          f"{'first packet after dark (ms)':>29}")
    for r in dark:
        print(f"{r['fabric']:9} {r['reconfig_us']:11g} {r['dilation']:8.0f} {r['probe_over_configured']:17.3f} "
              f"{r['controller_dark_s'] / r['configured_s']:22.3f} {r['latency_to_first_packet_s'] * 1e3:29.2f}")
    print(f"\n{'scenario':15} {'GPUs':>4} {'reconfigs':>9} {'dark mean | range | worst off':>34} "
          f"{'emulated/predicted':>18} {'faithful':>8}")
    for r in replanning:
        print(f"{r['scenario']:15} {r['hosts']:4} {r['reconfigurations']:9} {_replanning_cell(r):>34} "
              f"{_ratio_cell(r):>18} {_faithful_cell(r):>8}")
    runs = []
    for kind in FABRIC_SCENARIOS if args.only in (None, "runs") else ():
        runs += iteration_ratios(kind, hosts, placed=not args.quick)
    print(f"\n{'fabric':13} {'workload':17} {'GPUs':>4} {'emulated/predicted min/mean/max':>32} "
          f"{'faithful':>8} {'wall s':>7}")
    for r in runs:
        ratio = "failed: " + str(r["error"])[:40] if r["ratio_mean"] is None else \
            f"{r['ratio_min']:.3f}/{r['ratio_mean']:.3f}/{r['ratio_max']:.3f}"
        print(f"{r['fabric']:13} {r['workload']:17} {r['hosts']:4} {ratio:>32} {_faithful_cell(r):>8} "
              f"{r['wall_s']:7.1f}")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    if args.only and (out / "optical.json").exists():  # keep the parts that did not run
        kept = json.loads((out / "optical.json").read_text())
        dark = dark if args.only == "dark" else kept.get("dark", [])
        replanning = replanning if args.only == "replanning" else kept.get("replanning", [])
        runs = runs if args.only == "runs" else kept.get("runs", [])
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    (out / "optical.json").write_text(json.dumps({"measured_at": stamp, "dark": dark, "replanning": replanning,
                                                  "runs": runs}, indent=1))
    lines = [f"# Reconfigurable fabrics ({stamp})", "", "| fabric | reconfig µs | dilation | probe/configured | "
             "controller/configured | first packet after dark (ms) |", "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['fabric']} | {r['reconfig_us']:g} | {r['dilation']:.0f} | {r['probe_over_configured']:.3f} | "
              f"{r['controller_dark_s'] / r['configured_s']:.3f} | {r['latency_to_first_packet_s'] * 1e3:.2f} |"
              for r in dark]
    lines += ["", "Re-planning every period: each reconfiguration's dark time as the hosts applied it, over the "
              "configured (mean | range | worst deviation).", "",
              "| scenario | GPUs | real dark µs | dilation | reconfigurations | dark mean | range | worst off "
              "| emulated/predicted | faithful |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['scenario']} | {r['hosts']} | {r['real_dark_us']:g} | {r['dilation']:.0f} "
              f"| {r['reconfigurations']} | "
              f"{_replanning_cell(r)} | {_ratio_cell(r)} | {_faithful_cell(r)} |" for r in replanning]
    lines += ["", "| fabric | workload | GPUs | emulated/predicted min/mean/max | faithful | wall s |",
              "| --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        ratio = f"failed: {r['error']}" if r["ratio_mean"] is None else \
            f"{r['ratio_min']:.3f}/{r['ratio_mean']:.3f}/{r['ratio_max']:.3f}"
        lines.append(f"| {r['fabric']} | {r['workload']} | {r['hosts']} | {ratio} | {_faithful_cell(r)} | "
                     f"{r['wall_s']:.1f} |")
    (out / "optical.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

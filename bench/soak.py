"""Soak: 50 consecutive short runs (Elect-Flat and INA alternating, 4 GPUs) in one process, then
a check that bridges, root-namespace links, network namespaces, our processes and registry records
are back to their starting counts, and how memory moved.

Run as root: `.venv/bin/python bench/soak.py [--runs 50]`. Writes bench/results/soak.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from testbed.core.paths import registry_dir
from testbed.emulation.registry import list_bridges
from testbed.emulation.run import Runner
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario

ROOT = Path(__file__).resolve().parent.parent
OURS = ("hosts.agent", "controller.launch", "mininet:h", "hosts.ina.node")
CASES = [("quickstart.yaml", {"fabric.hosts": 4, "workload.iterations": 1, "workload.bytes": 20_000_000}),
         ("ina-allreduce.yaml", {"fabric.hosts": 4, "workload.iterations": 1, "workload.bytes": 20_000_000})]


def counts() -> dict:
    namespaces, ours = set(), 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            namespaces.add(os.readlink(entry / "ns" / "net"))
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ours += any(marker in cmdline for marker in OURS)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.count("\n")
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    records = len(list(registry_dir().glob("*.json"))) if registry_dir().is_dir() else 0
    return {"bridges": len(list_bridges()), "root_links": links, "net_namespaces": len(namespaces),
            "our_processes": ours, "registry_records": records,
            "mem_available_mb": int(meminfo["MemAvailable"].split()[0]) / 1024,
            "runner_max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    before = counts()
    statuses = []
    middle = before
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="testbed-soak-") as work:
        for index in range(args.runs):
            name, overrides = CASES[index % len(CASES)]
            scenario = apply_overrides(load_scenario(ROOT / "scenarios" / name), overrides)
            result = Runner(prepare(scenario), Path(work) / f"run{index}").execute()
            statuses.append(result["status"] == "ok" and result["sums_correct"])
            if index == args.runs // 2 - 1:
                middle = counts()
            print(f"run {index + 1}/{args.runs}: {name} {result['status']}", flush=True)
    time.sleep(1.0)  # processes killed at the end of the last run are reaped
    after = counts()
    leaked = {k: after[k] - before[k] for k in ("bridges", "root_links", "net_namespaces", "our_processes",
                                                "registry_records")}
    report = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "runs": args.runs,
              "ok_runs": sum(statuses), "wall_s": time.monotonic() - began, "before": before, "middle": middle,
              "after": after, "leaked": leaked,
              "mem_available_drop_mb": before["mem_available_mb"] - after["mem_available_mb"],
              "runner_rss_growth_mb_second_half": after["runner_max_rss_mb"] - middle["runner_max_rss_mb"]}
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "soak.json").write_text(json.dumps(report, indent=1) + "\n")
    table = ["| measure | before | after | change |", "| --- | ---: | ---: | ---: |"]
    for key in ("bridges", "root_links", "net_namespaces", "our_processes", "registry_records",
                "mem_available_mb", "runner_max_rss_mb"):
        table.append(f"| {key} | {before[key]:.0f} | {after[key]:.0f} | {after[key] - before[key]:+.0f} |")
    text = (f"{report['ok_runs']} of {args.runs} runs ok with exact sums in {report['wall_s']:.0f} s; runner peak "
            f"RSS grew {report['runner_rss_growth_mb_second_half']:+.1f} MB over the second half\n\n"
            + "\n".join(table))
    (out / "soak.md").write_text(text + "\n")
    print(text)
    return 0 if all(v == 0 for v in leaked.values()) and all(statuses) else 1


if __name__ == "__main__":
    raise SystemExit(main())

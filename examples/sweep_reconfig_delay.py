"""Sweep the reconfiguration delay of a live SiP-Ring or SiP-OCS run and compare the dark time the
controller measured with the configured one.

    testbed run scenarios/ring-allreduce.yaml --out runs/study --hold &
    python3 examples/sweep_reconfig_delay.py runs/study --delays-us 25 50 100 200
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

try:
    from controller.client import Northbound, NorthboundError
except ModuleNotFoundError:  # run outside the project's environment: the client needs only the standard library
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from controller.client import Northbound, NorthboundError


def toggled(plan: dict) -> tuple[list, list]:
    """Two link states that differ in one link: the current one and one with a link moved."""
    if plan["kind"] == "lightpaths":
        paths = [tuple(p) for p in plan["lightpaths"]]
        # One wavelength fewer on the widest lightpath (a plan may already use every wavelength).
        widest = max(range(len(paths)), key=lambda i: paths[i][2])
        s, d, c = paths[widest]
        return paths, paths[:widest] + ([(s, d, c - 1)] if c > 1 else []) + paths[widest + 1:]
    circuits = [tuple(c) for c in plan["circuits"]]
    return circuits, circuits[1:]  # drop one circuit, then bring it back


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--delays-us", type=float, nargs="+", default=[25, 50, 100, 200])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    api = Northbound.for_run(args.run_dir)
    original = api.settings()
    api.settings(policy="one-shot")  # the script, not the policy, decides the plan
    base, other = toggled(api.plan())
    setter = api.set_lightpaths if api.plan()["kind"] == "lightpaths" else api.set_circuits
    print(f"{'configured (µs)':>16} {'measured (µs)':>14} {'measured/configured':>20}")
    try:
        for delay in args.delays_us:
            api.settings(reconfig_us=delay)
            measured = []
            for _ in range(args.repeats):
                for state in (other, base):
                    event = api.wait_for(setter(state))
                    if event is not None:  # None: the plan was already in force (another script set it)
                        measured.append(event["real_measured_dark_s"] * 1e6)
            if not measured:
                print(f"{delay:16.1f} {'-':>14} {'-':>20}  (another script kept the plan unchanged)")
                continue
            mean = sum(measured) / len(measured)
            print(f"{delay:16.1f} {mean:14.1f} {mean / delay:20.3f}")
    finally:
        api.settings(policy=original["policy"], reconfig_us=original["reconfig_us"])
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except NorthboundError as error:  # one sentence, not a traceback
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None

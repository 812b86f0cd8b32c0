"""A custom wavelength policy for a live SiP-Ring run: every period, give each ring neighbour one
wavelength and share the rest of each GPU's wavelengths in proportion to the traffic it sent to
each destination in the last period (within reach), instead of the built-in greedy plan.

    testbed run scenarios/ring-allreduce.yaml --out runs/study --hold &
    python3 examples/custom_wavelength_policy.py runs/study --periods 50
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

try:
    from controller.client import Northbound, NorthboundError
except ModuleNotFoundError:  # run outside the project's environment: the client needs only the standard library
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from controller.client import Northbound, NorthboundError


START_LIMIT_S = 120.0  # how long to wait for the job's traffic (the fabric's start, the warm-ups)


def proportional(traffic: list[list[float]], wavelengths: int, reach: int) -> list[tuple[int, int, int]]:
    n = len(traffic)
    counts = {}
    for i in range(n):
        for j in ((i + 1) % n, (i - 1) % n):
            counts[(i, j)] = 1
    used_tx = {i: sum(c for (s, _), c in counts.items() if s == i) for i in range(n)}
    used_rx = {j: sum(c for (_, d), c in counts.items() if d == j) for j in range(n)}
    for i in range(n):
        row = {j: traffic[i][j] for j in range(n) if j != i and min((j - i) % n, (i - j) % n) <= reach}
        total = sum(row.values())
        spare = wavelengths - used_tx[i]
        for j, size in sorted(row.items(), key=lambda kv: -kv[1]):
            if total <= 0 or spare <= 0:
                break
            extra = min(spare, round(spare * size / total), wavelengths - used_rx[j])
            if extra > 0:
                counts[(i, j)] = counts.get((i, j), 0) + extra
                used_tx[i] += extra
                used_rx[j] += extra
    return [(s, d, c) for (s, d), c in sorted(counts.items())]


def _last_period(api: Northbound) -> list[list[float]]:
    """Bytes per GPU pair in the controller's last estimation period; the run's end ends the script."""
    try:
        return api.traffic()["last_period_bytes"]
    except NorthboundError as why:
        raise SystemExit(f"the run is gone: {why}") from None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--periods", type=int, default=50)
    args = parser.parse_args()
    api = Northbound.for_run(args.run_dir)
    topology = api.topology()
    if "ring" not in topology:
        raise SystemExit("this policy is for sip-ring fabrics")
    settings = api.settings(policy="one-shot")
    period_s = settings["estimate_period_us"] * 1e-6 * api.traffic()["dilation"]
    # Started beside `testbed run`, the script first waits for the job's traffic (the fabric's
    # start, the warm-ups), then re-plans every period for --periods periods.
    deadline = time.monotonic() + START_LIMIT_S
    while not any(map(any, _last_period(api))):
        if time.monotonic() > deadline:
            raise SystemExit(f"no traffic on the fabric within {START_LIMIT_S:.0f} s; is the run's job running?")
        time.sleep(period_s)
    applied = unchanged = refused = busy = 0
    for _ in range(args.periods):
        time.sleep(period_s)
        traffic = _last_period(api)
        if not any(map(any, traffic)):
            continue
        busy += 1
        plan = proportional(traffic, topology["ring"]["wavelengths"], topology["ring"]["reach"])
        try:
            if api.set_lightpaths(plan) is None:
                unchanged += 1
            else:
                applied += 1
        except NorthboundError as why:  # e.g. a segment would carry too many wavelengths
            refused += 1
            print(f"plan refused: {why}")
    print(f"{applied} plans applied, {refused} refused over {args.periods} periods "
          f"({busy} with traffic, {unchanged} of those already planned so)")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except NorthboundError as error:  # one sentence, not a traceback
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None

"""Accurate waits inside a host: lowered timer slack, sleep to near the deadline, then spin."""

from __future__ import annotations

import ctypes
import time

import numpy as np

PR_SET_TIMERSLACK = 29
# Sleep until this long before the deadline, then spin: time.sleep overshoots by tens of µs.
SPIN_WINDOW_S = 200e-6


def lower_timer_slack() -> bool:
    """Ask the kernel for 1 ns timer slack for this thread group; False where prctl is unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def wait_until(deadline: float, clock=time.monotonic, spin: bool = True) -> float:
    """Wait until `deadline` on `clock`; returns the overshoot in seconds (never negative).

    spin=False only sleeps: right when many hosts wake together on few cores, where spinning
    ranks would starve each other.
    """
    remaining = deadline - clock()
    if not spin:
        if remaining > 0:
            time.sleep(remaining)
        return max(0.0, clock() - deadline)
    if remaining > SPIN_WINDOW_S:
        time.sleep(remaining - SPIN_WINDOW_S)
    while clock() < deadline:
        pass
    return max(0.0, clock() - deadline)


def precise_sleep(duration_s: float, clock=time.monotonic) -> float:
    """Wait `duration_s`; returns the overshoot in seconds."""
    if duration_s <= 0:
        return 0.0
    return wait_until(clock() + duration_s, clock)


def compute_timing(waits: list[tuple[float, float]]) -> dict:
    """How a host's dilated compute steps kept to plan, from (target, overshoot) seconds per step.

    overshoot_frac, the time compute took beyond its plan over the plan, is what an iteration
    time feels; the per-step ratios show how the timer errs on short steps.
    """
    planned_s = sum(target for target, _ in waits)
    errors = [over / target for target, over in waits if target > 0]
    return {"steps": len(waits),
            "planned_s": planned_s,
            "overshoot_s": sum(over for _, over in waits),
            "overshoot_frac": sum(over for _, over in waits) / planned_s if planned_s > 0 else 0.0,
            "error_mean_frac": sum(errors) / len(errors) if errors else 0.0,
            "error_p99_frac": float(np.percentile(errors, 99)) if errors else 0.0}

"""Accurate waits inside a host: lowered timer slack, sleep to near the deadline, then spin."""

from __future__ import annotations

import ctypes
import time

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

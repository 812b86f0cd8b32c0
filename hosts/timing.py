"""Accurate waits inside a host: lowered timer slack, sleep to near the deadline, then spin."""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

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


def lower_priority(niceness: int) -> None:
    """Yield the CPU to Open vSwitch and the runner: this process's nice value and, where the kernel
    groups each session for scheduling (autogroup; Mininet starts every host's programs in a session
    of their own), its session's. With 128 sessions each weighing as much as Open vSwitch's, the
    switch waited for a CPU 70% of the time at every round's end, however nice the agents were."""
    os.nice(niceness)
    try:
        with open("/proc/self/autogroup", "w") as group:
            group.write(str(niceness))
    except OSError:  # no autogroup here: the nice value alone applies
        pass


@contextmanager
def background_priority() -> Iterator[None]:
    """Run the body only when no other task wants a CPU (SCHED_IDLE for this thread): the checking
    and preparing a rank does between rounds must not slow the ranks still in the round. At 128
    hosts on 2 cores it is ~35 ms of CPU per rank and round, and done at normal priority it
    stretched the round's last steps by 0.3-1.1 s of wall time."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):  # not Linux, or not allowed: run the body as is
        yield
        return
    try:
        yield
    finally:
        try:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except OSError:  # an unprivileged, niced agent may not leave SCHED_IDLE (RLIMIT_NICE): it stays idle
            pass


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

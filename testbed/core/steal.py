"""CPU time a hypervisor took from this machine (steal) during each iteration, from samples of the
kernel's cumulative CPU counters: a virtual machine whose host is shared forwards less than it
calibrated, and its packets wait while its cores are taken away."""

from __future__ import annotations

import bisect
from dataclasses import dataclass


@dataclass(frozen=True)
class CpuSample:
    """The kernel's cumulative counters over all cores (ticks) at a monotonic instant."""

    t_s: float
    steal_ticks: int
    total_ticks: int
    busy_ticks: int = 0  # all but idle and I/O wait (steal included: the cores were not ours)


def steal_share(before: CpuSample, after: CpuSample) -> float | None:
    """The share of all cores' time between two samples that the hypervisor took."""
    total = after.total_ticks - before.total_ticks
    return None if total <= 0 else (after.steal_ticks - before.steal_ticks) / total


def busy_fraction(before: CpuSample, after: CpuSample) -> float | None:
    """The share of all cores' time between two samples that was not idle."""
    total = after.total_ticks - before.total_ticks
    return None if total <= 0 else (after.busy_ticks - before.busy_ticks) / total


def _counters_at(samples: list[CpuSample], times: list[float], t_s: float) -> tuple[float, float]:
    """(steal, total) at `t_s`, interpolated between the samples around it (the nearest end outside);
    `times` are the samples' instants, in order."""
    i = bisect.bisect_left(times, t_s)
    if i == 0:
        return samples[0].steal_ticks, samples[0].total_ticks
    if i == len(samples):
        return samples[-1].steal_ticks, samples[-1].total_ticks
    a, b = samples[i - 1], samples[i]
    w = (t_s - a.t_s) / (b.t_s - a.t_s) if b.t_s > a.t_s else 1.0
    return (a.steal_ticks + w * (b.steal_ticks - a.steal_ticks),
            a.total_ticks + w * (b.total_ticks - a.total_ticks))


def steal_fractions(samples: list[CpuSample], windows: list[tuple[float, float]]) -> list[float | None]:
    """The share of all cores' time the hypervisor took during each (start, end) window, or None for
    a window the samples do not cover (fewer than two samples, or no ticks counted inside it)."""
    ordered = sorted(samples, key=lambda s: s.t_s)
    times = [s.t_s for s in ordered]
    found: list[float | None] = []
    for start, end in windows:
        if len(ordered) < 2 or end <= ordered[0].t_s or start >= ordered[-1].t_s:
            found.append(None)
            continue
        steal0, total0 = _counters_at(ordered, times, start)
        steal1, total1 = _counters_at(ordered, times, end)
        found.append((steal1 - steal0) / (total1 - total0) if total1 > total0 else None)
    return found

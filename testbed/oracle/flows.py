"""Max-min fair sharing of capacitated resources by flows that arrive over time (fluid model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from testbed.core.units import bytes_to_bits

Resource = tuple[Any, ...]  # any hashable name, e.g. ("out", 3)
FREEZE_TOLERANCE = 0.01


@dataclass(frozen=True)
class Flow:
    start_s: float
    bytes: float
    resources: tuple[Resource, ...]


def max_min_rates(flows: list[Flow], capacity_bps: dict[Resource, float]) -> list[float]:
    """Progressive filling: raise every unfrozen flow's rate together; freeze flows at a full resource."""
    names = list({r: None for f in flows for r in f.resources})
    column = {r: j for j, r in enumerate(names)}
    uses = np.zeros((len(flows), len(names)), dtype=bool)
    for i, f in enumerate(flows):
        uses[i, [column[r] for r in f.resources]] = True
    remaining = np.array([capacity_bps[r] for r in names], dtype=float)
    rates = np.zeros(len(flows))
    active = np.ones(len(flows), dtype=bool)
    while active.any():
        users = uses[active].sum(axis=0)
        loaded = users > 0
        shares = np.full(len(names), np.inf)
        shares[loaded] = remaining[loaded] / users[loaded]
        share = shares.min()
        rates[active] += share
        remaining -= share * users
        # Resources within 1% of the bottleneck freeze together: far fewer rounds, and flows there
        # give up at most 1% of their max-min rate.
        full = loaded & (shares <= share * (1 + FREEZE_TOLERANCE))
        active &= ~uses[:, full].any(axis=1)
    return [float(r) for r in rates]


@dataclass(frozen=True)
class DarkWindow:
    """While a reconfiguration retunes `resources` (start_s to end_s), flows over any of them carry nothing."""
    start_s: float
    end_s: float
    resources: frozenset[Resource]


def completion_times(flows: list[Flow], capacity_bps: dict[Resource, float],
                     dark: tuple[DarkWindow, ...] = ()) -> list[float]:
    """When each flow finishes (absolute seconds), flows joining as they start, rates re-shared at
    every arrival, departure and edge of a dark window. A flow over a dark resource pauses, whether
    it started before the window or during it, and leaves its share to the others."""
    if not flows:
        return []
    starts = np.array([f.start_s for f in flows], dtype=float)
    left = np.array([bytes_to_bits(f.bytes) for f in flows], dtype=float)
    done = np.where(left <= 0, starts, np.inf)
    windows = [w for w in dark if w.end_s > w.start_s]
    hit = [[any(r in w.resources for r in f.resources) for w in windows] for f in flows]
    events = np.unique(np.concatenate([starts, [w.start_s for w in windows], [w.end_s for w in windows]]))
    now = events[0]
    while True:
        active = np.flatnonzero((starts <= now + 1e-15) & np.isinf(done))
        later = events[events > now + 1e-15]
        paused = {i for i in active for j, w in enumerate(windows)
                  if hit[i][j] and w.start_s <= now + 1e-15 < w.end_s}
        moving = np.array([i for i in active if i not in paused], dtype=int)
        if moving.size == 0:
            if later.size == 0:
                return [float(t) for t in done]
            now = later[0]
            continue
        rates = np.array(max_min_rates([flows[i] for i in moving], capacity_bps))
        finish = left[moving] / rates
        step = min(finish.min(), later[0] - now if later.size else np.inf)
        left[moving] -= rates * step
        now += step
        finished = moving[left[moving] <= 1e-6 * np.maximum(1.0, left[moving] + rates * step)]
        done[finished] = now

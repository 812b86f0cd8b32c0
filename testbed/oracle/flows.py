"""Max-min fair sharing of capacitated resources by flows that arrive over time (fluid model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from testbed.units import bytes_to_bits

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


def completion_times(flows: list[Flow], capacity_bps: dict[Resource, float]) -> list[float]:
    """When each flow finishes (absolute seconds), flows joining as they start, rates re-shared at
    every arrival and departure."""
    if not flows:
        return []
    starts = np.array([f.start_s for f in flows])
    left = np.array([bytes_to_bits(f.bytes) for f in flows])
    done = np.where(left <= 0, starts, np.inf)
    arrivals = np.unique(starts)
    now = arrivals[0]
    while True:
        active = np.flatnonzero((starts <= now + 1e-15) & np.isinf(done))
        later = arrivals[arrivals > now + 1e-15]
        if active.size == 0:
            if later.size == 0:
                return [float(t) for t in done]
            now = later[0]
            continue
        rates = np.array(max_min_rates([flows[i] for i in active], capacity_bps))
        finish = left[active] / rates
        step = min(finish.min(), later[0] - now if later.size else np.inf)
        left[active] -= rates * step
        now += step
        finished = active[left[active] <= 1e-6 * np.maximum(1.0, left[active] + rates * step)]
        done[finished] = now

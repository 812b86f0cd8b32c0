"""Max-min fair sharing of capacitated resources by flows that arrive over time (fluid model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from testbed.model.units import bytes_to_bits

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
    # Which flow uses which resource as (flow, resource) index pairs, each pair once: a dense
    # flows × resources matrix took gigabytes at thousands of GPUs.
    used = [(i, column[r]) for i, f in enumerate(flows) for r in dict.fromkeys(f.resources)]
    flow_of = np.array([i for i, _ in used], dtype=np.int64)
    resource_of = np.array([j for _, j in used], dtype=np.int64)
    remaining = np.array([capacity_bps[r] for r in names], dtype=float)
    rates = np.zeros(len(flows))
    active = np.ones(len(flows), dtype=bool)
    while active.any():
        users = np.bincount(resource_of[active[flow_of]], minlength=len(names))
        loaded = users > 0
        shares = np.full(len(names), np.inf)
        shares[loaded] = remaining[loaded] / users[loaded]
        share = shares.min()
        rates[active] += share
        remaining -= share * users
        # Resources within 1% of the bottleneck freeze together: far fewer rounds, and flows there
        # give up at most 1% of their max-min rate.
        full = loaded & (shares <= share * (1 + FREEZE_TOLERANCE))
        active[flow_of[full[resource_of]]] = False
    return [float(r) for r in rates]


@dataclass(frozen=True)
class DarkWindow:
    """While a reconfiguration retunes `resources` (start_s to end_s), flows over any of them carry nothing."""
    start_s: float
    end_s: float
    resources: frozenset[Resource]


RatesMemo = dict[tuple[tuple[Resource, ...], ...], np.ndarray]


def completion_times(flows: list[Flow], capacity_bps: dict[Resource, float],
                     dark: tuple[DarkWindow, ...] = (), memo: RatesMemo | None = None) -> list[float]:
    """When each flow finishes (absolute seconds), flows joining as they start, rates re-shared at
    every arrival, departure and edge of a dark window. A flow over a dark resource pauses, whether
    it started before the window or during it, and leaves its share to the others. `memo` keeps
    max-min rates by the moving flows' resources across calls over the same `capacity_bps` (a
    schedule's layers repeat the same transfers)."""
    if not flows:
        return []
    starts = np.array([f.start_s for f in flows], dtype=float)
    left = np.array([bytes_to_bits(f.bytes) for f in flows], dtype=float)
    done = np.where(left <= 0, starts, np.inf)
    # Windows that end after the first flow starts and darken a resource some flow crosses, opened
    # as time reaches them (a schedule's later windows cost nothing here).
    used = {r for f in flows for r in f.resources}
    first = float(starts.min())
    pending = sorted((w for w in dark if w.end_s > max(w.start_s, first) and not used.isdisjoint(w.resources)),
                     key=lambda w: w.start_s)
    opened: list[tuple[float, np.ndarray]] = []  # (end, mask of the flows it pauses)
    next_window = 0
    shares: dict[bytes, np.ndarray] = {}  # max-min rates by the set of moving flows
    memo = {} if memo is None else memo
    resources = [f.resources for f in flows]
    arrivals = np.unique(starts)
    no_pause = np.zeros(len(flows), dtype=bool)
    now = arrivals[0]
    while np.isinf(done).any():
        while next_window < len(pending) and pending[next_window].start_s <= now + 1e-15:
            w = pending[next_window]
            next_window += 1
            opened.append((w.end_s, np.array([not w.resources.isdisjoint(r) for r in resources], dtype=bool)))
        opened = [(end, members) for end, members in opened if end > now + 1e-15]
        paused = np.logical_or.reduce([members for _, members in opened]) if opened else no_pause
        moving = np.flatnonzero((starts <= now + 1e-15) & np.isinf(done) & ~paused)
        upcoming = arrivals[np.searchsorted(arrivals, now + 1e-15, side="right"):][:1]
        later = min([*upcoming, *[end for end, _ in opened],
                     *([pending[next_window].start_s] if next_window < len(pending) else [])], default=np.inf)
        if moving.size == 0:
            if np.isinf(later):
                break
            now = later
            continue
        key = moving.tobytes()
        rates = shares.get(key)
        if rates is None:  # else a window's edge or an arrival left the moving set as it was
            uses = tuple([resources[i] for i in moving.tolist()])
            rates = memo.get(uses)
            if rates is None:
                rates = memo[uses] = np.array(max_min_rates([flows[i] for i in moving], capacity_bps))
            shares[key] = rates
        finish = left[moving] / rates
        step = min(finish.min(), later - now)
        left[moving] -= rates * step
        now += step
        finished = moving[left[moving] <= 1e-6 * np.maximum(1.0, left[moving] + rates * step)]
        done[finished] = now
    return [float(t) for t in done]

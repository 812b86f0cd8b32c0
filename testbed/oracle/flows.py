"""Max-min fair sharing of capacitated resources by flows that arrive over time (fluid model)."""

from __future__ import annotations

from dataclasses import dataclass

Resource = tuple  # any hashable name, e.g. ("out", 3)


@dataclass(frozen=True)
class Flow:
    start_s: float
    bytes: float
    resources: tuple[Resource, ...]


def max_min_rates(flows: list[Flow], capacity_bps: dict[Resource, float]) -> list[float]:
    """Progressive filling: raise every unfrozen flow's rate together; freeze flows at a full resource."""
    rates = [0.0] * len(flows)
    remaining = {r: capacity_bps[r] for f in flows for r in f.resources}
    users: dict[Resource, set[int]] = {}
    for i, f in enumerate(flows):
        for r in f.resources:
            users.setdefault(r, set()).add(i)
    active = set(range(len(flows)))
    while active:
        share, bottleneck = min(((remaining[r] / len(u & active), r) for r, u in users.items() if u & active),
                                key=lambda t: t[0])
        frozen = users[bottleneck] & active
        for i in active:
            rates[i] += share
        for r, u in users.items():
            remaining[r] -= share * len(u & active)
        active -= frozen
    return rates


def completion_times(flows: list[Flow], capacity_bps: dict[Resource, float]) -> list[float]:
    """When each flow finishes (absolute seconds), flows joining as they start, rates re-shared at
    every arrival and departure."""
    pending = sorted(range(len(flows)), key=lambda i: flows[i].start_s)
    left = [f.bytes * 8 for f in flows]
    done = [0.0] * len(flows)
    active: list[int] = []
    now = flows[pending[0]].start_s if pending else 0.0
    cursor = 0
    while cursor < len(pending) or active:
        while cursor < len(pending) and flows[pending[cursor]].start_s <= now + 1e-15:
            i = pending[cursor]
            cursor += 1
            if left[i] <= 0:
                done[i] = max(now, flows[i].start_s)
            else:
                active.append(i)
        if not active:
            now = flows[pending[cursor]].start_s
            continue
        rates = max_min_rates([flows[i] for i in active], capacity_bps)
        finish = min(left[i] / r for i, r in zip(active, rates))
        arrival = flows[pending[cursor]].start_s - now if cursor < len(pending) else float("inf")
        step = min(finish, arrival)
        still = []
        for i, r in zip(active, rates):
            left[i] -= r * step
            if left[i] <= 1e-6 * max(1.0, flows[i].bytes):
                done[i] = now + step
            else:
                still.append(i)
        active = still
        now += step
    return done

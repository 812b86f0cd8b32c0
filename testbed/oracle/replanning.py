"""Reconfigurable fabrics inside the oracle: when a controller that re-plans every estimation period
would retune links, and which, as dark windows.

The controller re-plans towards the traffic it measures, so transfers are modelled at what the plan
of the iteration's traffic gives them (placed runs on SiP-Ring match that plan when emulated); what
re-planning costs is its dark time. The windows follow the schedule as it runs undisturbed (a first
pass), so they do not depend on the dark time; the second pass pauses every flow over a link being
retuned, under way or starting, for its window. More dark time therefore never shortens an
iteration."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from testbed.fabrics.all_kinds import behaviour
from testbed.fabrics.topology import estimate_period_us, reconfig_us
from testbed.model.fabric_section import FabricSection
from testbed.model.units import us_to_s
from testbed.network.flow_model import FlowModel, Traffic
from testbed.network.flows import DarkWindow


@dataclass
class PeriodTraffic:
    """Bytes each GPU pair starts sending in each estimation period (what the controller measures)."""
    period_s: float
    by_period: dict[int, dict[tuple[int, int], float]] = field(default_factory=dict)

    def add(self, pair: tuple[int, int], start_s: float, size: float) -> None:
        bucket = self.by_period.setdefault(int(start_s // self.period_s), {})
        bucket[pair] = bucket.get(pair, 0.0) + size


@dataclass(frozen=True)
class Replans:
    """The dark windows of the re-plans that changed links."""
    period_s: float
    dark_s: float
    count: int  # re-plans made, whether or not they changed a link
    windows: tuple[DarkWindow, ...]

    def dark_before_s(self, end_s: float) -> float:
        """Dark time of the re-plans that began before `end_s`."""
        return sum(min(w.end_s, end_s) - w.start_s for w in self.windows if w.start_s < end_s)


def replans_during_run(fabric: FabricSection) -> bool:
    return behaviour(fabric.kind).replans(fabric)


def period_traffic(fabric: FabricSection) -> PeriodTraffic:
    return PeriodTraffic(us_to_s(estimate_period_us(fabric)))


def plan_replans(fabric: FabricSection, k: int, l: int, steady: FlowModel, traffic: PeriodTraffic,
                 recurring: tuple[tuple[int, int], ...]) -> Replans:
    """Every period with traffic in the period before, the kind's controller re-plans from that
    traffic; the links whose capacity changed go dark for reconfig_us from the period's start."""
    replan: Callable[[FabricSection, int, int, Traffic, tuple[tuple[int, int], ...], FlowModel, float],
                     FlowModel] | None
    replan = behaviour(fabric.kind).replan
    assert replan is not None, f"{fabric.kind} re-plans during a run but has no replan()"
    dark_s = us_to_s(reconfig_us(fabric))
    cache: dict[tuple[frozenset[Any], frozenset[Any]], FlowModel] = {}
    current, count, windows = steady, 0, []
    for period in sorted(p + 1 for p in traffic.by_period):
        last = traffic.by_period[period - 1]
        # Layers repeat, and so do their periods' traffic: plan each distinct estimate once from
        # each plan in force.
        key = frozenset((pair, round(math.log2(size))) for pair, size in last.items() if size > 0)
        if not key:
            continue
        held = frozenset(current.capacity_bps.items())
        model = cache.get((key, held))
        if model is None:
            model = cache[(key, held)] = replan(fabric, k, l, last, recurring, current, dark_s)
        changed = frozenset(r for r in set(model.capacity_bps) | set(current.capacity_bps)
                            if model.capacity_bps.get(r) != current.capacity_bps.get(r))
        if changed:
            start = period * traffic.period_s
            windows.append(DarkWindow(start, start + dark_s, changed))
        count += 1
        current = model
    return Replans(traffic.period_s, dark_s, count, tuple(windows))

"""Reconfigurable fabrics inside the oracle: when a controller that re-plans every estimation period
would retune links, and which, as dark windows.

The controller re-plans towards the traffic it measures, so transfers are modelled at what the plan
of the iteration's traffic gives them (placed runs on SiP-Ring match that plan when emulated); what
re-planning costs is its dark time. The windows follow the schedule as it runs undisturbed (a first
pass), so they do not depend on the dark time; the second pass pauses every flow over a link being
retuned, under way or starting, for its window. More dark time therefore never shortens an
iteration."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from testbed.fabrics import partitioned
from testbed.fabrics.all_kinds import behaviour
from testbed.fabrics.topology import estimate_period_us, reconfig_us, retune_threshold_us
from testbed.model.fabric_section import FabricSection
from testbed.model.units import us_to_s
from testbed.network.flow_model import FlowModel, Traffic
from testbed.network.flows import DarkWindow
from testbed.network.link_planner import quantised


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


class Replanner:
    """The kind's controller rule for the next plan from a period's measured traffic (the same
    function the controller calls), for a group of k GPUs (l groups) keeping its `recurring`
    pairs. Layers repeat, and so do their periods' traffic: each distinct estimate (as the
    planners round it) is planned once from each plan in force."""

    def __init__(self, fabric: FabricSection, k: int, l: int, recurring: tuple[tuple[int, int], ...],
                 partitions: tuple[tuple[int, ...], ...] = ()) -> None:
        replan = behaviour(fabric.kind).replan
        assert replan is not None, f"{fabric.kind} re-plans during a run but has no replan()"
        self._replan: Callable[[FabricSection, int, int, Traffic, tuple[tuple[int, int], ...], FlowModel, float],
                               FlowModel] = replan
        if partitions:  # each job re-plans its own share (testbed.fabrics.partitioned)
            self._replan = lambda fabric, k, l, traffic, recurring, current, dark_s: partitioned.replan(
                fabric, partitions, k, traffic, recurring, current, dark_s)
        self.fabric, self.k, self.l, self.recurring = fabric, k, l, recurring
        self.period_s = us_to_s(estimate_period_us(fabric))
        self.dark_s = us_to_s(reconfig_us(fabric))
        self.threshold_s = us_to_s(retune_threshold_us(fabric))
        self._cache: dict[tuple[frozenset[Any], frozenset[Any]], FlowModel] = {}

    def next_plan(self, measured: Traffic, current: FlowModel) -> FlowModel | None:
        """The plan for the period after `measured`; None when the estimate is empty."""
        key = frozenset(quantised(measured).items())
        if not key:
            return None
        held = frozenset(current.capacity_bps.items())
        model = self._cache.get((key, held))
        if model is None:
            try:
                model = self._replan(self.fabric, self.k, self.l, measured, self.recurring, current, self.threshold_s)
            except ValueError:  # a plan that leaves a pair the job needs without a path: the
                model = current  # controller refuses it and keeps the plan in force (optical_app)
            self._cache[(key, held)] = model
        return model


def changed_resources(before: FlowModel, after: FlowModel) -> frozenset[Any]:
    """The links whose capacity a re-plan changes (what goes dark while it is made)."""
    return frozenset(r for r in set(after.capacity_bps) | set(before.capacity_bps)
                     if after.capacity_bps.get(r) != before.capacity_bps.get(r))


def plan_replans(fabric: FabricSection, k: int, l: int, steady: FlowModel, traffic: PeriodTraffic,
                 recurring: tuple[tuple[int, int], ...]) -> Replans:
    """Every period with traffic in the period before, the kind's controller re-plans from that
    traffic; the links whose capacity changed go dark for reconfig_us from the period's start."""
    replanner = Replanner(fabric, k, l, recurring)
    dark_s = replanner.dark_s
    current, count, windows = steady, 0, []
    for period in sorted(p + 1 for p in traffic.by_period):
        model = replanner.next_plan(traffic.by_period[period - 1], current)
        if model is None:
            continue
        changed = changed_resources(current, model)
        if changed:
            start = period * traffic.period_s
            windows.append(DarkWindow(start, start + dark_s, changed))
        count += 1
        current = model
    return Replans(traffic.period_s, dark_s, count, tuple(windows))

"""Reconfigurable fabrics inside the oracle: when a controller that re-plans every estimation period
would retune links, and which, as dark windows.

The controller re-plans towards the traffic it measures, so transfers are modelled at what the plan
of the iteration's traffic gives them (placed runs on SiP-Ring match that plan when emulated); what
re-planning costs is its dark time. The windows follow the schedule as it runs undisturbed (a first
pass), so they do not depend on the dark time; the second pass pauses every flow over a link being
retuned, under way or starting, for its window. More dark time therefore never shortens an
iteration. That two-pass model is the placer's estimate (testbed.oracle.iteration); the schedule
simulation meets the same rule period by period instead (LiveReplans, with the controller's delay)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from testbed.fabrics import partitioned
from testbed.fabrics.all_kinds import behaviour
from testbed.fabrics.timing import dark_us, estimate_period_us, retune_threshold_us
from testbed.model.fabric_section import FabricSection
from testbed.model.units import BITS_PER_BYTE, us_to_s
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
        self.dark_s = us_to_s(dark_us(fabric))
        self.threshold_s = us_to_s(retune_threshold_us(fabric))
        self._cache: dict[tuple[frozenset[Any], frozenset[Any]], FlowModel] = {}
        self._plans: dict[frozenset[Any], FlowModel] = {}  # one model per distinct plan

    def next_plan(self, measured: Traffic, current: FlowModel) -> FlowModel | None:
        """The plan for the period after `measured`; None when the estimate is empty."""
        key = frozenset(quantised(measured).items())
        if not key:
            return None
        held = current.key
        model = self._cache.get((key, held))
        if model is None:
            try:
                model = self._replan(self.fabric, self.k, self.l, measured, self.recurring, current, self.threshold_s)
            except ValueError:  # a plan that leaves a pair the job needs without a path: the
                model = current  # controller refuses it and keeps the plan in force (optical_app)
            if len(self._cache) >= REPLANNER_CACHE_SIZE:
                self._cache, self._plans = {}, {}
            model = self._cache[(key, held)] = self._plans.setdefault(model.key, model)
        return model


# Estimates kept per controller rule, and controller rules kept: the retune rule simulates one
# rule at several controller delays and iterations, each meeting mostly the same estimates.
REPLANNER_CACHE_SIZE = 4096
SHARED_REPLANNERS = 2
_replanners: dict[tuple[Any, ...], Replanner] = {}


def shared_replanner(fabric: FabricSection, k: int, l: int, recurring: tuple[tuple[int, int], ...],
                     partitions: tuple[tuple[int, ...], ...] = ()) -> Replanner:
    """The Replanner for this rule, shared by the simulations that use it (its plans depend on
    nothing else); the least recently used rule is dropped beyond SHARED_REPLANNERS."""
    key = (fabric.model_dump_json(), k, l, recurring, partitions)
    found = _replanners.pop(key, None) or Replanner(fabric, k, l, recurring, partitions)
    _replanners[key] = found
    while len(_replanners) > SHARED_REPLANNERS:
        del _replanners[next(iter(_replanners))]
    return found


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


class LiveReplans:
    """The controller's re-planning as a simulation meets it: the bytes each pair moves per period,
    the plan asked for at each period's end, and the retune's dark window, which starts `lag_s`
    after that end (the controller reads the switches' counters and plans before it retunes; the
    old plan carries on meanwhile). One retune at a time: periods ending while one is on its way
    are measured but not planned from, as in the controller."""

    def __init__(self, fabric: FabricSection, n: int, recurring: tuple[tuple[int, int], ...],
                 partitions: tuple[tuple[int, ...], ...], lag_s: float = 0.0) -> None:
        self.replanner = shared_replanner(fabric, n, 1, recurring, partitions)
        self.period_s, self.lag_s = self.replanner.period_s, lag_s
        self.next_event_s = self.next_period_s = self.period_s
        self.current: dict[tuple[int, int], float] = {}
        self.pending: FlowModel | None = None  # planned: dark from pending_s (then inf) until dark_end_s
        self.pending_s = self.dark_end_s = math.inf
        self.dark_capacity_bps: dict[Any, float] | None = None
        self.plans = self.retunes = 0
        self.dark_total_s = 0.0

    def moved(self, pair: tuple[int, int], bits: float) -> None:
        self.current[pair] = self.current.get(pair, 0.0) + bits / BITS_PER_BYTE

    def step(self, now: float, model: FlowModel) -> FlowModel | None:
        """At `now` (a period's end, a retune's start or its end): the plan that takes over now, if any."""
        taken_over = None
        if self.pending is not None and now >= self.dark_end_s - 1e-15:
            taken_over, self.pending, self.dark_capacity_bps = self.pending, None, None
            self.pending_s = self.dark_end_s = math.inf
        held = taken_over or model
        if now >= self.next_period_s - 1e-15:
            measured = {p: v for p, v in self.current.items() if v > 0 and p[0] != p[1]}
            self.current = {}
            self.next_period_s += self.period_s
            new = self.replanner.next_plan(measured, held) if self.pending is None else None
            if new is not None:
                self.plans += 1
                if held.key != new.key:  # some link's capacity changes
                    self.retunes += 1
                    self.pending, self.pending_s = new, now + self.lag_s
        if self.pending is not None and now >= self.pending_s - 1e-15:
            new, self.pending_s = self.pending, math.inf
            self.dark_end_s = now + self.replanner.dark_s
            self.dark_capacity_bps = {r: min(c, new.capacity_bps.get(r, 0.0)) for r, c in held.capacity_bps.items()}
            self.dark_total_s += self.replanner.dark_s
            if self.replanner.dark_s <= 0:
                taken_over, self.pending, self.dark_capacity_bps = new, None, None
                self.dark_end_s = math.inf
        self.next_event_s = min(self.next_period_s, self.pending_s, self.dark_end_s)
        return taken_over

    def carry_over(self, end_s: float) -> None:
        """Into the next iteration, which starts as this one ends at `end_s`: the controller's period
        grid, the bytes measured so far in its period, a planned retune and a dark window go on (the
        barrier between a run's iterations is microseconds of emulated time); the counts start anew,
        the rest of a dark window counted in the iteration it darkens."""
        self.next_period_s -= end_s
        self.pending_s -= end_s
        self.dark_end_s -= end_s
        self.next_event_s = min(self.next_period_s, self.pending_s, self.dark_end_s)
        self.plans = self.retunes = 0
        self.dark_total_s = max(0.0, self.dark_end_s) if self.dark_capacity_bps is not None else 0.0

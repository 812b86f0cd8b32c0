"""The retune threshold a re-planning fabric runs with: the gain a re-plan must expect over the next
period before it retunes, picked by simulating the schedule with each candidate, standing still
(never retuning) among them, over the range of the controller's delay.

A controller estimates the next period from the last one. Where the traffic changes shape from one
period to the next, retuning whenever the estimate gains more than the dark time follows each phase
one period late, and can lose to the plan it started with even when retuning is free. Where phases
are short, which bytes fall in which period, and so every later plan, also hangs on microseconds of
the controller's timing: a placed ResNet-50 on SiP-Ring took 49 to 63 ms as each retune started 0
to 30 µs after its 100 µs period. The prediction therefore simulates each candidate with the
retunes starting at each of LAG_PERIODS after their period's end, keeps the candidate whose slowest
outcome is fastest (so it never loses to standing still whatever the delay), and predicts the mean
of that candidate's outcomes; the run's controller is given the threshold kept. A longer dark
time leaves a subset of the same ladder."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from testbed.fabrics.topology import estimate_period_us, reconfig_us
from testbed.model.fabric_section import FabricSection, ReconfigurableSection
from testbed.model.units import us_to_s
from testbed.network.collectives import Breakdown, Prediction
from testbed.oracle.replanning import replans_during_run
from testbed.oracle.schedule_sim import Simulated, simulate_counting_retunes

# Absolute rungs (µs), the same whatever the dark time, so that a longer one only removes rungs.
LADDER_US = (0.0, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0)
NEVER_US = 1e12  # above any gain a period can bring: the plan the run starts with stays
# Delays from a controller that retunes the instant its period ends to a fifth of a period later:
# reading the switches' counters and planning took 10-18 µs of emulated time at the dilations
# re-planning runs need (docs/optical.md), a fifth of a 100 µs period; at longer periods the same
# shares probe how much the hosts' own timing can move bytes between periods.
LAG_PERIODS = (0.0, 0.05, 0.1, 0.15, 0.2)


@dataclass(frozen=True)
class Retuning:
    """The fabric with its retune threshold set, and the schedule's prediction with it."""
    fabric: FabricSection
    prediction: Prediction
    message_bps: dict[tuple[int, int, str], float]
    tried: int  # thresholds simulated
    gpu_end_s: tuple[float, ...] = ()  # each GPU's last step's end in the prediction
    spread_s: tuple[float, float] = (0.0, 0.0)  # fastest and slowest outcome over the controller's delays


def candidates_us(dark_us: float) -> list[float]:
    """The dark time itself (a retune that gains more than it costs), the rungs above it, never."""
    return [dark_us] + [rung for rung in LADDER_US if rung > dark_us] + [NEVER_US]


def over_delays(schedule: dict[str, Any], fabric: FabricSection, give_up_above_s: float = float("inf")
                ) -> list[Simulated]:
    """The schedule simulated at each controller delay, stopping early once one outcome is slower
    than `give_up_above_s` (that candidate has lost) or the first retunes nothing (no delay then
    changes anything)."""
    outcomes: list[Simulated] = []
    for share in LAG_PERIODS:
        simulated = simulate_counting_retunes(schedule, fabric, share * us_to_s(estimate_period_us(fabric)))
        outcomes.append(simulated)
        if simulated.retunes == 0 or simulated.prediction.iteration_time_s > give_up_above_s:
            break
    return outcomes


def with_retune_threshold(schedule: dict[str, Any], fabric: FabricSection) -> Retuning:
    """The schedule simulated at the fabric's threshold, or, where the scenario leaves it unset on a
    fabric that re-plans, at the ladder's threshold whose slowest outcome is fastest (ties go to
    the higher, fewer retunes)."""
    if not replans_during_run(fabric):
        simulated = simulate_counting_retunes(schedule, fabric)
        return _retuning(fabric, [simulated], 1, "")
    if not isinstance(fabric, ReconfigurableSection) or fabric.retune_threshold_us is not None:
        return _retuning(fabric, over_delays(schedule, fabric), 1, "")
    still = fabric.model_copy(update={"retune_threshold_us": NEVER_US})
    best: tuple[ReconfigurableSection, list[Simulated]] = (still, [simulate_counting_retunes(schedule, still)])
    tried = 1
    for threshold_us in candidates_us(reconfig_us(fabric))[:-1]:
        candidate = fabric.model_copy(update={"retune_threshold_us": threshold_us})
        slowest_s = _slowest_s(best[1])
        outcomes = over_delays(schedule, candidate, give_up_above_s=slowest_s * (1 + 1e-12))
        tried += 1
        if outcomes[0].retunes == 0:  # stands still: so does every higher threshold
            break
        faster = _slowest_s(outcomes) < slowest_s * (1 - 1e-12)
        tied = best[0] is not still and _slowest_s(outcomes) <= slowest_s * (1 + 1e-12)
        if len(outcomes) == len(LAG_PERIODS) and (faster or tied):
            best = (candidate, outcomes)
    chosen, outcomes = best
    threshold = chosen.retune_threshold_us
    said = ("never retunes: no threshold beat the plan it starts with at every controller delay"
            if threshold == NEVER_US else
            f"retunes when a re-plan expects to gain over {threshold:g} µs in the next period")
    return _retuning(chosen, outcomes, tried,
                     f"; {said} (the best of {tried} thresholds tried, standing still included)")


def _slowest_s(outcomes: list[Simulated]) -> float:
    return max(o.prediction.iteration_time_s for o in outcomes)


def _retuning(fabric: FabricSection, outcomes: list[Simulated], tried: int, said: str) -> Retuning:
    """The mean of the outcomes over the controller's delays (one where nothing retuned)."""
    count = len(outcomes)
    times = [o.prediction.iteration_time_s for o in outcomes]
    parts = [o.prediction.breakdown for o in outcomes]
    breakdown = Breakdown(**{f.name: sum(getattr(b, f.name) for b in parts) / count for f in fields(Breakdown)})
    formula = outcomes[0].prediction.formula
    if count > 1:
        formula += (f"; the mean over a controller that retunes 0-{LAG_PERIODS[-1]:.0%} of a period after the period "
                    f"ends ({', '.join(f'{t * 1e3:.3f}' for t in times)} ms)")
    messages: dict[tuple[int, int, str], list[float]] = {}
    for o in outcomes:
        for key, rate in o.message_bps.items():
            messages.setdefault(key, []).append(rate)
    ends = tuple(sum(e) / count for e in zip(*(o.gpu_end_s for o in outcomes)))
    return Retuning(fabric, Prediction(sum(times) / count, breakdown, formula + said),
                    {key: sum(rates) / len(rates) for key, rates in messages.items()}, tried, ends,
                    (min(times), max(times)))

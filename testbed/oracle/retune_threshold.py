"""The retune rule a re-planning fabric runs with, picked by simulating the schedule: a rung of a fixed
ladder at or above the reconfiguration time, which is both how long the controller holds a retuned
link dark and the gain a re-plan must expect over the next period to retune, or standing still.

A controller estimates the next period from the last one. Where the traffic changes shape from one
period to the next, retuning whenever the estimate gains more than the dark time follows each phase
one period late, and can lose to the plan it started with even when retuning is free. Where phases
are short, which bytes fall in which period, and so every later plan, also hangs on microseconds of
the controller's timing: a placed ResNet-50 on SiP-Ring took 49 to 63 ms as each retune started 0
to 30 µs after its 100 µs period. So each rung is simulated with the retunes starting at each of
LAG_PERIODS after their period's end; a rung is admissible when no outcome is slower than standing
still and its mean gains at least the spread of its outcomes (where the controller's timing alone
moves the iteration more than retuning gains, the gain is not one a run can count on: a placed
ResNet-50 retuning every 100 µs was predicted 53.9-64.6 ms, mean 59.4, against 66.0 standing
still, and its runs measured 63-66), and the prediction is the mean outcome of the admissible
rung with the fastest mean (standing still included). The run's controller is given that rung.

Why the rungs and the hold: the same rule with the dark time itself as the rung is chaotic in it (a
microsecond more shifts which bytes each period measures, and so every later plan), and a longer
reconfiguration could then predict a faster iteration. A controller can always keep a link dark
longer than its hardware needs, so the rungs open to a reconfiguration time are those at or above
it, each simulated the same way whatever that time is: a longer one only removes rungs, and the
prediction is monotone in it by construction. A reconfiguration time between rungs is held to the
rung above it."""

from __future__ import annotations

from dataclasses import dataclass

from testbed.core import progress
from testbed.fabrics.timing import dark_us, estimate_period_us, reconfig_us
from testbed.model.fabric_section import FabricSection, ReconfigurableSection
from testbed.model.limits import MAX_RECONFIG_US
from testbed.model.schedule import Schedule
from testbed.model.units import us_to_s
from testbed.network.collectives import Prediction
from testbed.oracle.replanning import replans_during_run
from testbed.oracle.replicas import Replicas, simulate_replicated
from testbed.oracle.schedule_sim import Simulated, mean_outcome, simulate_counting_retunes

# Absolute rungs (µs), the same whatever the reconfiguration time, so that a longer one only removes
# rungs: 0, then 1, 2, 2.5 and 5 per decade up to 5 s (the values papers sweep fall on a rung).
LADDER_US = (0.0,) + tuple(m * 10.0 ** k for k in range(7) for m in (1.0, 2.0, 2.5, 5.0))
# Above any gain a period can bring, and the largest a scenario takes (the run's controller reads
# it from its config): the plan the run starts with stays.
NEVER_US = MAX_RECONFIG_US
# Delays from a controller that retunes the instant its period ends to a fifth of a period later:
# reading the switches' counters and planning took 10-18 µs of emulated time at the dilations
# re-planning runs need (docs/optical.md), a fifth of a 100 µs period; at longer periods the same
# shares probe how much the hosts' own timing can move bytes between periods.
LAG_PERIODS = (0.0, 0.05, 0.1, 0.15, 0.2)


@dataclass(frozen=True)
class Retuning:
    """The fabric with its retune rule set (threshold and dark hold), and the schedule's prediction with it."""
    fabric: FabricSection
    prediction: Prediction
    message_bps: dict[tuple[int, int, str], float]
    tried: int  # rules simulated (rungs and standing still)
    gpu_end_s: tuple[float, ...] = ()  # each GPU's last step's end in the prediction
    spread_s: tuple[float, float] = (0.0, 0.0)  # fastest and slowest outcome over the controller's delays


def candidates_us(shortest_dark_us: float) -> list[float]:
    """The rungs open to a reconfiguration time (those at or above it), then never."""
    return [rung for rung in LADDER_US if rung >= shortest_dark_us] + [NEVER_US]


def over_delays(schedule: Schedule, fabric: FabricSection, give_up_above_s: float = float("inf"),
                give_up_mean_above_s: float = float("inf")) -> list[Simulated]:
    """The schedule simulated at each controller delay, stopping early once one outcome is slower
    than `give_up_above_s`, once the mean cannot come under `give_up_mean_above_s` (the candidate
    has lost either way), or when the first retunes nothing (no delay then changes anything)."""
    outcomes: list[Simulated] = []
    for k, share in enumerate(LAG_PERIODS):
        with progress.part(k / len(LAG_PERIODS), 1 / len(LAG_PERIODS),
                           f"delay {k + 1}/{len(LAG_PERIODS)}: "):
            simulated = simulate_counting_retunes(schedule, fabric, share * us_to_s(estimate_period_us(fabric)))
        outcomes.append(simulated)
        floor_of_mean_s = sum(o.prediction.iteration_time_s for o in outcomes) / len(LAG_PERIODS)
        if simulated.retunes == 0 or simulated.prediction.iteration_time_s > give_up_above_s \
                or floor_of_mean_s > give_up_mean_above_s:
            break
    return outcomes


def with_retune_threshold(schedule: Schedule, fabric: FabricSection, replicas: Replicas | None = None) -> Retuning:
    """The schedule simulated with the fabric's threshold, or, where the scenario leaves it unset on
    a fabric that re-plans, with the admissible rung whose mean over the controller's delays is
    fastest (ties go to the higher rung: fewer retunes), standing still included. `replicas`: the
    schedule's data-parallel replicas, where it is copies of one (testbed.oracle.replicas)."""
    if not replans_during_run(fabric):
        simulated = simulate_replicated(schedule, fabric, replicas)
        return _retuning(fabric, [simulated], 1, "")
    if not isinstance(fabric, ReconfigurableSection) or fabric.retune_threshold_us is not None:
        return _retuning(fabric, over_delays(schedule, fabric), 1, "")
    still = fabric.model_copy(update={"retune_threshold_us": NEVER_US})
    rungs = candidates_us(dark_us(fabric))[:-1]
    with progress.part(0.0, 1 / (len(rungs) + 1), "standing still: "):
        standing = simulate_counting_retunes(schedule, still)
    still_s = standing.prediction.iteration_time_s
    best: tuple[ReconfigurableSection, list[Simulated]] = (still, [standing])
    tried = 1
    for k, rung_us in enumerate(rungs):
        candidate = fabric.model_copy(update={"retune_threshold_us": rung_us, "dark_hold_us": rung_us})
        best_mean_s = _mean_s(best[1])
        # each rung a share of the work; most ladders stop well before the last rung
        with progress.part((k + 1) / (len(rungs) + 1), 1 / (len(rungs) + 1),
                           f"retune rule {k + 1}/{len(rungs)} (dark {rung_us:g} µs), "):
            outcomes = over_delays(schedule, candidate, give_up_above_s=still_s * (1 + 1e-12),
                                   give_up_mean_above_s=best_mean_s * (1 + 1e-12))
        tried += 1
        if outcomes[0].retunes == 0:  # stands still: so does every higher rung
            break
        times = [o.prediction.iteration_time_s for o in outcomes]
        if len(outcomes) == len(LAG_PERIODS) and admissible(times, still_s) \
                and _mean_s(outcomes) <= best_mean_s * (1 + 1e-12):
            best = (candidate, outcomes)
    chosen, outcomes = best
    rung = chosen.retune_threshold_us
    said = ("never retunes: no rung beat the plan it starts with at every controller delay"
            if rung == NEVER_US else
            f"holds a retuned link dark {rung:g} µs (reconfig_us {reconfig_us(fabric):g}) and retunes when a "
            f"re-plan expects to gain more than that in the next period")
    return _retuning(chosen, outcomes, tried, f"; {said} (the best of {tried} rules tried: rungs and standing still)")


def _mean_s(outcomes: list[Simulated]) -> float:
    return sum(o.prediction.iteration_time_s for o in outcomes) / len(outcomes)


def admissible(times_s: list[float], still_s: float) -> bool:
    """A rung whose outcomes over the controller's delays took `times_s`: none slower than standing
    still (`still_s`), and the mean's gain at least their spread."""
    slowest, fastest, mean = max(times_s), min(times_s), sum(times_s) / len(times_s)
    return slowest <= still_s * (1 + 1e-12) and still_s - mean >= (slowest - fastest) * (1 - 1e-12)


def _slowest_s(outcomes: list[Simulated]) -> float:
    return max(o.prediction.iteration_time_s for o in outcomes)


def _retuning(fabric: FabricSection, outcomes: list[Simulated], tried: int, said: str) -> Retuning:
    """The mean of the outcomes over the controller's delays (one where nothing retuned)."""
    times = [o.prediction.iteration_time_s for o in outcomes]
    if len(outcomes) > 1:
        said = (f"; the mean over a controller that retunes 0-{LAG_PERIODS[-1]:.0%} of a period after the period "
                f"ends ({', '.join(f'{t * 1e3:.3f}' for t in times)} ms)") + said
    mean = mean_outcome(outcomes, said)
    return Retuning(fabric, mean.prediction, mean.message_bps, tried, mean.gpu_end_s, (min(times), max(times)))

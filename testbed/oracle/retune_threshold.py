"""The retune threshold a re-planning fabric runs with: the gain a re-plan must expect over the next
period before it retunes, picked by simulating the schedule with each candidate, standing still
(never retuning) among them.

A controller estimates the next period from the last one. Where the traffic changes shape from one
period to the next, retuning whenever the estimate gains more than the dark time follows each phase
one period late, and can lose to the plan it started with even when retuning is free. The prediction
therefore simulates the schedule at a fixed ladder of thresholds from the dark time up and keeps the
fastest; the run's controller is given the one kept. Standing still is a candidate, so the
prediction never loses to it, and a longer dark time leaves a subset of the same ladder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from testbed.fabrics.topology import reconfig_us
from testbed.model.fabric_section import FabricSection, ReconfigurableSection
from testbed.network.collectives import Prediction
from testbed.oracle.replanning import replans_during_run
from testbed.oracle.schedule_sim import Simulated, simulate_counting_retunes

# Absolute rungs (µs), the same whatever the dark time, so that a longer one only removes rungs.
LADDER_US = (0.0, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0)
NEVER_US = 1e12  # above any gain a period can bring: the plan the run starts with stays


@dataclass(frozen=True)
class Retuning:
    """The fabric with its retune threshold set, and the schedule's prediction with it."""
    fabric: FabricSection
    prediction: Prediction
    message_bps: dict[tuple[int, int, str], float]
    tried: int  # thresholds simulated
    gpu_end_s: tuple[float, ...] = ()  # each GPU's last step's end in the prediction


def candidates_us(dark_us: float) -> list[float]:
    """The dark time itself (a retune that gains more than it costs), the rungs above it, never."""
    return [dark_us] + [rung for rung in LADDER_US if rung > dark_us] + [NEVER_US]


def with_retune_threshold(schedule: dict[str, Any], fabric: FabricSection) -> Retuning:
    """The schedule simulated at the fabric's threshold, or, where the scenario leaves it unset on a
    fabric that re-plans, at the best of the ladder's (ties go to the higher, fewer retunes)."""
    if (not isinstance(fabric, ReconfigurableSection) or fabric.retune_threshold_us is not None
            or not replans_during_run(fabric)):
        simulated = simulate_counting_retunes(schedule, fabric)
        return Retuning(fabric, simulated.prediction, simulated.message_bps, 1, simulated.gpu_end_s)
    best: tuple[ReconfigurableSection, Simulated] | None = None
    tried = 0
    for threshold_us in candidates_us(reconfig_us(fabric)):
        candidate = fabric.model_copy(update={"retune_threshold_us": threshold_us})
        simulated = simulate_counting_retunes(schedule, candidate)
        tried += 1
        if best is None or simulated.prediction.iteration_time_s <= best[1].prediction.iteration_time_s * (1 + 1e-12):
            best = (candidate, simulated)
        if simulated.retunes == 0:  # stood still: every higher threshold does the same
            if best[0] is candidate:
                best = (fabric.model_copy(update={"retune_threshold_us": NEVER_US}), simulated)
            break
    assert best is not None
    chosen, simulated = best
    prediction, rates, threshold = simulated.prediction, simulated.message_bps, chosen.retune_threshold_us
    said = ("never retunes: no threshold beat the plan it starts with" if threshold == NEVER_US else
            f"retunes when a re-plan expects to gain over {threshold:g} µs in the next period")
    formula = f"{prediction.formula}; {said} (the best of {tried} thresholds tried, standing still included)"
    return Retuning(chosen, Prediction(prediction.iteration_time_s, prediction.breakdown, formula), rates, tried,
                    simulated.gpu_end_s)

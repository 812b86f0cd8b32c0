"""Schedules predicted by simulating them step by step (placed models, traces, several jobs), with
the controller's re-plans and the retune rule the prediction picks where the fabric re-plans."""

from __future__ import annotations

from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.network.collectives import Prediction
from testbed.oracle.replicas import Replicas
from testbed.oracle.retune_threshold import Retuning, with_retune_threshold
from testbed.workloads.predicted import JobPrediction, Predicted

STEPWISE = "step-by-step simulation"


def retuned(scenario: Scenario, schedule: Schedule, replicas: Replicas | None = None) -> Retuning:
    """The schedule simulated on the scenario's fabric with its retune rule (chosen where unset);
    `replicas`: where its GPUs sit among data-parallel replicas that run the same steps."""
    return with_retune_threshold(schedule, scenario.fabric, replicas)


def simulated(scenario: Scenario, schedule: Schedule, retuning: Retuning | None = None,
              jobs: tuple[JobPrediction, ...] = (), prediction: Prediction | None = None) -> Predicted:
    """The schedule's prediction: its simulation (`retuning`, made here unless given; `prediction`
    where the kind words it differently). The run carries the retune rule the prediction picked:
    its controller follows the same rule."""
    retuning = retuning or retuned(scenario, schedule)
    low, high = retuning.spread_s
    return Predicted(scenario.model_copy(update={"fabric": retuning.fabric}), schedule,
                     prediction or retuning.prediction,
                     STEPWISE, retuning.message_bps, retuning.gpu_end_s, (low, high) if low < high else None, jobs)

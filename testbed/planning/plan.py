"""One plan for every command: a scenario's schedule and the prediction it is judged against
(`check`, `predict`, `compare`, `search`, sweeps), and for `run` how it is sized for this machine.
Pure, but for the stored calibration `prepare` reads when not given one."""

from __future__ import annotations

import math
from dataclasses import dataclass

from testbed.core.calibration import Calibration, load_calibration
from testbed.fabrics.all_kinds import EMULATED_FABRICS
from testbed.model.errors import InputError
from testbed.model.scenario import Scenario
from testbed.network.collectives import Prediction
from testbed.workloads.all_kinds import predicted, prepared
from testbed.workloads.predicted import JobPrediction, Predicted
from testbed.workloads.sizing import Prepared
from testbed.workloads.stepwise import simulated
from testbed.workloads.trace.load import load_trace


@dataclass(frozen=True)
class CheckReport:
    skipped_nodes: tuple[tuple[str, int], ...]  # a Chakra trace's nodes that move no data, by type
    warnings: tuple[str, ...]
    prediction: Prediction  # what `predict` says: check refuses what it refuses


def plan(scenario: Scenario) -> Predicted:
    """The scenario's schedule and its one prediction; InputError (one sentence) for anything no
    schedule or prediction can be made of, or that takes no time."""
    found = predicted(scenario)
    seconds = found.prediction.iteration_time_s
    if not math.isfinite(seconds):
        raise InputError(f"{scenario.name}: the prediction is {seconds} s, not a time; a step's compute or size "
                         f"is beyond what the simulation can time")
    if seconds <= 0:
        raise InputError(f"{scenario.name}: an iteration takes no time (no step computes or moves a byte), so "
                         f"there is nothing to predict or emulate; give steps that compute or communicate")
    return found


def plan_schedule(scenario: Scenario, path: str) -> Predicted:
    """A schedule file's prediction on the scenario's fabric, made as a `trace` workload's is
    (the same checks, the same retune rule)."""
    schedule = load_trace(path, scenario.fabric.hosts, scenario.workload.iterations, given_as="--schedule")
    return simulated(scenario, schedule)


def check_scenario(scenario: Scenario) -> CheckReport:
    """What `testbed check` finds beyond the schema: everything the prediction builds (the
    placement, profiles, traces and process groups, each job's schedule, the prediction itself,
    refused with the sentence `predict` gives), and fields that do not do what they seem to."""
    found = plan(scenario)
    return CheckReport(tuple(found.schedule.skipped_nodes), tuple(scenario.fabric.field_warnings()),
                       found.prediction)


def predict_scenario(scenario: Scenario) -> Prediction:
    """The prediction a run of the scenario is judged against."""
    return plan(scenario).prediction


def predict_jobs(scenario: Scenario) -> tuple[Prediction, list[JobPrediction]]:
    """Several jobs: the prediction, and each job's time together and alone."""
    found = plan(scenario)
    return found.prediction, list(found.jobs)


def prepare(scenario: Scenario, calibration: Calibration | None = None) -> Prepared:
    """The plan sized for a run on a machine of `calibration` (the stored one when not given)."""
    if scenario.fabric.kind not in EMULATED_FABRICS:
        raise InputError(
            f"{scenario.name}: testbed run emulates {', '.join(EMULATED_FABRICS)} so far (this is "
            f"{scenario.fabric.kind}); model workloads can be placed and predicted on every fabric with "
            f"`testbed place` and `testbed predict`"
        )
    return prepared(plan(scenario), calibration or load_calibration())

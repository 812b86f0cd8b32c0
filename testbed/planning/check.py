"""What `testbed check` finds in a scenario beyond its schema: everything a prediction builds first
(the placement, profiles, traces and process groups, each job's schedule), and fields that do not
do what they seem to. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from testbed.model.scenario import Scenario
from testbed.planning.workloads import schedule_for


@dataclass(frozen=True)
class CheckReport:
    skipped_nodes: tuple[tuple[str, int], ...]  # a Chakra trace's nodes that move no data, by type
    warnings: tuple[str, ...]


def check_scenario(scenario: Scenario) -> CheckReport:
    """Raises InputError (one sentence) for what no schedule can run: an unknown model or profile,
    a batch that does not split, a model that does not fit, a trace that does not parse."""
    schedule = schedule_for(scenario)
    return CheckReport(tuple(schedule.skipped_nodes), tuple(scenario.fabric.field_warnings()))

"""The registry of workload kinds: each kind's folder gives its scenario section and its kind (how
it is scheduled, predicted, sized and summarised); the scenario's `workload` is the union of the
sections, discriminated on `kind`. Adding a kind is adding its folder and its line here."""

from __future__ import annotations

from typing import Annotated, Any, Union, get_args

from pydantic import Field

from testbed.core.calibration import Calibration
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.model.workload_section import WorkloadSection
from testbed.workloads.base import WorkloadKind
from testbed.workloads.chakra.kind import KIND as CHAKRA
from testbed.workloads.chakra.section import ChakraWorkload
from testbed.workloads.collective.kind import KIND as COLLECTIVE
from testbed.workloads.collective.section import CollectiveWorkload
from testbed.workloads.jobs.kind import JobsKind
from testbed.workloads.jobs.section import JobsWorkload
from testbed.workloads.llm.kind import KIND as LLM
from testbed.workloads.llm.section import LlmWorkload
from testbed.workloads.model.kind import KIND as MODEL
from testbed.workloads.model.section import ModelWorkload
from testbed.workloads.predicted import Predicted
from testbed.workloads.simai.kind import KIND as SIMAI
from testbed.workloads.simai.section import SimaiWorkload
from testbed.workloads.sizing import Prepared, finish
from testbed.workloads.trace.kind import KIND as TRACE
from testbed.workloads.trace.section import TraceWorkload


def schedule_for(scenario: Scenario) -> Schedule:
    """What the agents replay for the scenario's workload, made by its kind."""
    return kind_of(scenario.workload).schedule(scenario, scenario.workload)


# every kind, in the order the docs list them
_REGISTERED: tuple[WorkloadKind[Any], ...] = (
    COLLECTIVE, MODEL, LLM, TRACE, CHAKRA, SIMAI, JobsKind(schedule_for),
)
KINDS: dict[type[WorkloadSection], WorkloadKind[Any]] = {kind.section: kind for kind in _REGISTERED}

AnyWorkload = Annotated[Union[CollectiveWorkload, ModelWorkload, LlmWorkload, TraceWorkload, ChakraWorkload,
                                   SimaiWorkload, JobsWorkload],
                        Field(discriminator="kind")]
assert set(get_args(get_args(AnyWorkload)[0])) == set(KINDS), "AnyWorkload must list every registered kind"
SECTIONS: dict[str, type[WorkloadSection]] = {
    str(get_args(section.model_fields["kind"].annotation)[0]): section for section in KINDS}


def kind_of(workload: WorkloadSection) -> WorkloadKind[Any]:
    found = KINDS.get(type(workload))
    if found is None:
        raise ValueError(f"no workload kind registered for {type(workload).__name__}")
    return found


def predicted(scenario: Scenario) -> Predicted:
    """The scenario's schedule and the one prediction every command reports."""
    return kind_of(scenario.workload).predict(scenario, scenario.workload)


def prepared(found: Predicted, calibration: Calibration) -> Prepared:
    """How a run of the prediction's schedule is sized for a machine of `calibration`."""
    workload = found.scenario.workload
    return finish(kind_of(workload).size(found, workload, calibration), found, calibration)

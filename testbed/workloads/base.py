"""What every workload kind's folder provides: its section, its schedule, its prediction and how a
run of it is sized and summarised."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from testbed.core.calibration import Calibration
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.model.workload_section import WorkloadSection
from testbed.workloads.predicted import Predicted
from testbed.workloads.sizing import Prepared

W = TypeVar("W", bound=WorkloadSection)  # the kind's own section


class WorkloadKind(ABC, Generic[W]):
    """One workload kind: registered beside its section in testbed.workloads.all_kinds."""

    section: type[W]

    @abstractmethod
    def schedule(self, scenario: Scenario, workload: W) -> Schedule:
        """What the agents replay (InputError, one sentence, for what cannot be scheduled)."""

    @abstractmethod
    def predict(self, scenario: Scenario, workload: W) -> Predicted:
        """The schedule and its prediction (InputError for what the oracle does not model)."""

    @abstractmethod
    def size(self, predicted: Predicted, workload: W, calibration: Calibration) -> Prepared:
        """How a run of the predicted schedule is sized for this machine and summarised."""

"""The `trace` workload kind: a JSON schedule or trace file, predicted by simulating it step by step."""

from __future__ import annotations

from testbed.core.calibration import Calibration
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.workloads.base import WorkloadKind
from testbed.workloads.predicted import Predicted
from testbed.workloads.sizing import Prepared, size_schedule
from testbed.workloads.stepwise import simulated
from testbed.workloads.trace.load import load_trace
from testbed.workloads.trace.section import TraceWorkload


class TraceKind(WorkloadKind[TraceWorkload]):
    section = TraceWorkload

    def schedule(self, scenario: Scenario, workload: TraceWorkload) -> Schedule:
        return load_trace(workload.trace, scenario.fabric.hosts, workload.iterations)

    def predict(self, scenario: Scenario, workload: TraceWorkload) -> Predicted:
        return simulated(scenario, self.schedule(scenario, workload))

    def size(self, predicted: Predicted, workload: TraceWorkload, calibration: Calibration) -> Prepared:
        return size_schedule(predicted, calibration)


KIND = TraceKind()

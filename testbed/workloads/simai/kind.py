"""The `simai` workload kind: an AICB workload file, predicted by simulating its schedule step by step."""

from __future__ import annotations

from dataclasses import replace

from testbed.core.calibration import Calibration
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.workloads.base import WorkloadKind
from testbed.workloads.predicted import Predicted
from testbed.workloads.simai.load import read_simai, simai_schedule
from testbed.workloads.simai.section import SimaiWorkload
from testbed.workloads.sizing import Prepared, size_schedule
from testbed.workloads.stepwise import simulated
from testbed.workloads.traffic import traffic_bytes


class SimaiKind(WorkloadKind[SimaiWorkload]):
    section = SimaiWorkload

    def schedule(self, scenario: Scenario, workload: SimaiWorkload) -> Schedule:
        return simai_schedule(read_simai(workload.path), scenario.fabric.hosts, workload.iterations, scenario.name)

    def predict(self, scenario: Scenario, workload: SimaiWorkload) -> Predicted:
        schedule = self.schedule(scenario, workload)
        return replace(simulated(scenario, schedule), traffic_bytes=traffic_bytes(schedule))

    def size(self, predicted: Predicted, workload: SimaiWorkload, calibration: Calibration) -> Prepared:
        return size_schedule(predicted, calibration)


KIND = SimaiKind()

"""The `llm` workload kind: a large model's Megatron-style schedule, checked against the device's
memory and predicted by simulating it step by step."""

from __future__ import annotations

from dataclasses import replace

from testbed.core.calibration import Calibration
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.workloads.base import WorkloadKind
from testbed.workloads.llm.memory import check_memory
from testbed.workloads.llm.schedule import llm_schedule
from testbed.workloads.llm.section import LlmWorkload
from testbed.workloads.predicted import Predicted
from testbed.workloads.sizing import Prepared, size_schedule
from testbed.workloads.stepwise import simulated
from testbed.workloads.traffic import traffic_bytes


class LlmKind(WorkloadKind[LlmWorkload]):
    section = LlmWorkload

    def schedule(self, scenario: Scenario, workload: LlmWorkload) -> Schedule:
        check_memory(workload)
        return llm_schedule(workload, scenario.fabric.hosts, scenario.name)

    def predict(self, scenario: Scenario, workload: LlmWorkload) -> Predicted:
        memory = check_memory(workload)
        schedule = llm_schedule(workload, scenario.fabric.hosts, scenario.name)
        found = simulated(scenario, schedule)
        return replace(found, traffic_bytes=traffic_bytes(schedule), gpu_memory=memory)

    def size(self, predicted: Predicted, workload: LlmWorkload, calibration: Calibration) -> Prepared:
        return size_schedule(predicted, calibration)


KIND = LlmKind()

"""The `chakra` workload kind: Chakra execution traces, one per rank, predicted by simulating them."""

from __future__ import annotations

from testbed.core.calibration import Calibration
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.workloads.base import WorkloadKind
from testbed.workloads.chakra.load import load_chakra
from testbed.workloads.chakra.section import ChakraWorkload
from testbed.workloads.predicted import Predicted
from testbed.workloads.sizing import Prepared, size_schedule
from testbed.workloads.stepwise import simulated


class ChakraKind(WorkloadKind[ChakraWorkload]):
    section = ChakraWorkload

    def schedule(self, scenario: Scenario, workload: ChakraWorkload) -> Schedule:
        return load_chakra(workload.path, scenario.fabric.hosts, workload.iterations, workload.process_groups,
                           scenario.name, workload.comm_groups)

    def predict(self, scenario: Scenario, workload: ChakraWorkload) -> Predicted:
        return simulated(scenario, self.schedule(scenario, workload))

    def size(self, predicted: Predicted, workload: ChakraWorkload, calibration: Calibration) -> Prepared:
        return size_schedule(predicted, calibration)


KIND = ChakraKind()

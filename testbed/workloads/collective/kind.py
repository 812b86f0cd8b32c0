"""The `collective` workload kind: its schedule, prediction and sizing, by who runs the algorithm:
the GPUs themselves, summation services (BytePS, PS) or an aggregation node (INA)."""

from __future__ import annotations

from dataclasses import replace

from testbed.core.calibration import Calibration
from testbed.fabrics.all_kinds import KINDS
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.model.units import gbps_to_bps, transfer_time_s, us_to_s
from testbed.network.collectives import Prediction, collective_cost
from testbed.shared.collective_plans import SERVICE_ALGORITHMS
from testbed.workloads.base import WorkloadKind
from testbed.workloads.collective.byteps.plan import predict_byteps, size_byteps
from testbed.workloads.collective.byteps.schedule import byteps_schedule
from testbed.workloads.collective.ina import ina_rate_cap_bps, predict_ina_fabric, size_ina
from testbed.workloads.collective.predict import predict, simulated_on
from testbed.workloads.collective.schedule import collective_schedule
from testbed.workloads.collective.section import CollectiveWorkload
from testbed.workloads.predicted import Predicted
from testbed.workloads.sizing import Prepared, emulation_plan
from testbed.workloads.stepwise import STEPWISE

CLOSED_FORM = "closed form"
# Collectives whose steps are exchanges between ranks that start together after the barrier: a
# stall in one is the run's, not the algorithm's (BytePS and INA chunks queue behind the chunks
# before them by design).
STALL_JUDGED_ALGORITHMS = ("ring", "tree", "halving-doubling")


class CollectiveKind(WorkloadKind[CollectiveWorkload]):
    section = CollectiveWorkload

    def schedule(self, scenario: Scenario, workload: CollectiveWorkload) -> Schedule:
        if workload.algorithm in SERVICE_ALGORITHMS:
            return byteps_schedule(scenario, workload)
        return collective_schedule(scenario, workload)

    def predict(self, scenario: Scenario, workload: CollectiveWorkload) -> Predicted:
        schedule = self.schedule(scenario, workload)
        method = STEPWISE if simulated_on(scenario.fabric, workload.collective, workload.algorithm) else CLOSED_FORM
        return Predicted(scenario, schedule, self._prediction(scenario, workload, schedule), method)

    @staticmethod
    def _prediction(scenario: Scenario, workload: CollectiveWorkload, schedule: Schedule) -> Prediction:
        if workload.algorithm in SERVICE_ALGORITHMS:
            return predict_byteps(scenario, workload, schedule)
        if KINDS[scenario.fabric.kind].aggregation_node:
            return predict_ina_fabric(scenario, schedule)
        return predict(scenario, schedule)

    def size(self, predicted: Predicted, workload: CollectiveWorkload, calibration: Calibration) -> Prepared:
        scenario, schedule, prediction = predicted.scenario, predicted.schedule, predicted.prediction
        if workload.algorithm in SERVICE_ALGORITHMS:
            prepared = size_byteps(scenario, workload, schedule, prediction, calibration)
        elif workload.algorithm == "ina":
            prepared = size_ina(scenario, schedule, prediction, calibration, float(workload.bytes))
        else:
            prepared = _size_exchanges(scenario, workload, schedule, prediction, calibration)
        # simulated over the paths the plan gives each pair (some relayed): like steps differ there
        simulated = simulated_on(scenario.fabric, workload.collective, workload.algorithm)
        return replace(prepared, communication_from_collectives=True,
                       stalls_judged=workload.algorithm in STALL_JUDGED_ALGORITHMS and not simulated,
                       step_rates_judged=not simulated)


def _size_exchanges(scenario: Scenario, workload: CollectiveWorkload, schedule: Schedule, prediction: Prediction,
                    calibration: Calibration) -> Prepared:
    """A collective the GPUs run among themselves: its shortest exchange and smallest message size
    the run; on fabrics slower than Elect-Flat (a share of circuits, wavelengths, uplinks) busy
    transfers should see the host rate scaled by how much slower the oracle says it is."""
    fabric = scenario.fabric
    rate_bps = gbps_to_bps(fabric.gpu_bandwidth_gbps)
    cost = collective_cost(workload.collective, workload.algorithm, fabric.hosts, workload.bytes, rate_bps,
                           us_to_s(fabric.latency_us))
    shortest = us_to_s(fabric.latency_us) + transfer_time_s(cost.smallest_message_bytes, rate_bps)
    cap = ina_rate_cap_bps(scenario, calibration) if KINDS[fabric.kind].aggregation_node else None
    plan = emulation_plan(scenario, schedule, prediction, calibration, shortest, cost.smallest_message_bytes, cap,
                          buffer_bytes=float(workload.bytes))
    expected = plan.host_rate_bps * min(1.0, cost.time_s / prediction.iteration_time_s)
    return Prepared(scenario, schedule, prediction, plan, shortest, cost.smallest_message_bytes, expected,
                    ina_node_packets_per_s=calibration.node_packets_per_s if cap else None)


KIND = CollectiveKind()

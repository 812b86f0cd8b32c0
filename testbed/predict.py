"""Analytic oracle: the expected real-world iteration time of a schedule on a fabric (alpha-beta)."""

from __future__ import annotations

from dataclasses import dataclass

from testbed.errors import InputError
from testbed.scenario import Scenario
from testbed.schedule import Schedule
from testbed.units import gbps_to_bps, transfer_time_s, us_to_s


@dataclass(frozen=True)
class Breakdown:
    compute_s: float = 0.0
    communication_s: float = 0.0
    reconfiguration_s: float = 0.0
    retransmission_s: float = 0.0

    def to_json(self) -> dict[str, float]:
        return {
            "compute_s": self.compute_s,
            "communication_s": self.communication_s,
            "reconfiguration_s": self.reconfiguration_s,
            "retransmission_s": self.retransmission_s,
        }


@dataclass(frozen=True)
class Prediction:
    iteration_time_s: float
    breakdown: Breakdown
    formula: str

    def to_json(self) -> dict[str, object]:
        return {
            "predicted_iteration_time_s": self.iteration_time_s,
            "breakdown": self.breakdown.to_json(),
            "formula": self.formula,
        }


def ring_allreduce_time_s(hosts: int, size_bytes: float, rate_bps: float, latency_s: float) -> float:
    """2(n-1)·α + 2(n-1)/n · M/B (DESIGN §7): 2(n-1) steps, each one message of M/n bytes."""
    steps = 2 * (hosts - 1)
    return steps * latency_s + steps * transfer_time_s(size_bytes / hosts, rate_bps)


def predict_scenario(scenario: Scenario) -> Prediction:
    """The oracle for any scenario: placed models through the placer's plan, collectives directly."""
    if scenario.workload.kind == "model":
        from testbed.oracle.iteration import predict_plan
        from testbed.schedule import model_plan

        return predict_plan(model_plan(scenario), scenario.fabric)
    from testbed.schedule import schedule_for

    return predict(scenario, schedule_for(scenario))


def predict(scenario: Scenario, schedule: Schedule) -> Prediction:
    """Predict one iteration of a collective schedule; InputError for pairs the oracle does not model."""
    fabric = scenario.fabric
    if fabric.kind != "elect-flat":
        raise InputError(f"{scenario.name}: fabric.kind {fabric.kind} is not modelled yet; use elect-flat")
    steps = [step for gpu in schedule.gpus for step in gpu.steps]
    if not all(s.kind == "collective" and s.op == "allreduce" and s.algorithm == "ring" for s in steps):
        raise InputError(f"{scenario.name}: the oracle models ring all-reduce schedules only for now")
    size = max(s.bytes or 0 for s in steps)
    rate_bps = gbps_to_bps(fabric.gpu_bandwidth_gbps)
    latency_s = us_to_s(fabric.latency_us)
    total = ring_allreduce_time_s(schedule.hosts, size, rate_bps, latency_s)
    return Prediction(
        iteration_time_s=total,
        breakdown=Breakdown(communication_s=total),
        formula="ring all-reduce: 2(n-1)·alpha + 2(n-1)/n · M/B",
    )

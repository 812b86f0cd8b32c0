"""A collective's prediction: closed forms (alpha-beta) on non-blocking fabrics, a ring's steps over
the fabric's paths elsewhere; summation services and aggregation nodes in their own modules."""

from __future__ import annotations

from testbed.fabrics.all_kinds import KINDS
from testbed.model.errors import InputError
from testbed.model.fabric_section import FabricSection
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule, as_collective
from testbed.model.units import gbps_to_bps, us_to_s
from testbed.network.collectives import Breakdown, Prediction, collective_cost
from testbed.network.flows import Flow, completion_times
from testbed.oracle.fabrics import mp_flow_model
from testbed.oracle.schedule_sim import simulate_schedule
from testbed.shared.collective_plans import SERVICE_ALGORITHMS


def predict(scenario: Scenario, schedule: Schedule) -> Prediction:
    """Predict one iteration of a collective schedule run by the GPUs."""
    fabric = scenario.fabric
    steps = [step for gpu in schedule.gpus for step in gpu.steps]
    if not all(s.kind == "collective" for s in steps):
        raise InputError(f"{scenario.name}: predict(scenario, schedule) is for collective schedules")
    first = as_collective(steps[0])
    if simulated_on(fabric, first.op, first.algorithm):
        # all-to-all, broadcast, trees: each exchange of the algorithm's plan a flow over the
        # fabric's paths (circuits or lightpaths, relayed where a pair has none), as the run sends it
        return simulate_schedule(schedule, fabric)
    if not KINDS[fabric.kind].non_blocking:
        return _ring_on_fabric(first.op, len(first.group), first.bytes, fabric, schedule.traffic())
    cost = collective_cost(first.op, first.algorithm, len(first.group), first.bytes,
                           gbps_to_bps(fabric.gpu_bandwidth_gbps), us_to_s(fabric.latency_us))
    return Prediction(
        iteration_time_s=cost.time_s,
        breakdown=Breakdown(communication_s=cost.time_s),
        formula=f"{first.op} ({first.algorithm}): {cost.formula}",
    )


RING_STEP_OPS = {"allreduce": 2, "reducescatter": 1, "allgather": 1}  # passes of n-1 steps


def simulated_on(fabric: FabricSection, op: str, algorithm: str) -> bool:
    """Whether the GPUs' collective is simulated step by step: on a blocking fabric, all but a
    ring's steps (summation services and INA have models of their own)."""
    return (algorithm not in (*SERVICE_ALGORITHMS, "ina") and not KINDS[fabric.kind].non_blocking
            and not (algorithm == "ring" and op in RING_STEP_OPS))


def _ring_on_fabric(op: str, n: int, size_bytes: float, fabric: FabricSection,
                    traffic: dict[tuple[int, int], float]) -> Prediction:
    """A ring collective on any fabric: every step, each GPU sends M/n to the next at once, so a
    step takes as long as the slowest of those n concurrent transfers over the fabric's paths
    (circuits, lightpaths, uplinks), shared max-min fairly."""
    if not traffic:
        traffic = {(i, (i + 1) % n): size_bytes for i in range(n)}
    model = mp_flow_model(fabric, n, 1, traffic)
    flows = [Flow(0.0, size_bytes / n, model.resources(i, (i + 1) % n)) for i in range(n)]
    step_s = max(completion_times(flows, model.capacity_bps)) + us_to_s(fabric.latency_us)
    steps = RING_STEP_OPS[op] * (n - 1)
    notes = "; ".join(model.notes)
    formula = f"{op} (ring) on {fabric.kind}: {steps} steps × (α + slowest of n concurrent M/n transfers)"
    return Prediction(steps * step_s, Breakdown(communication_s=steps * step_s),
                      formula + (f"; {notes}" if notes else ""))

"""Analytic oracle: the expected real-world iteration time of a schedule on a fabric (alpha-beta)."""

from __future__ import annotations

from testbed.fabrics.all_kinds import KINDS
from testbed.fabrics.ina.node_links import InaRunTiming, lossy_ina_time_s, shared_slots
from testbed.fabrics.ina.section import InaFabric
from testbed.model.errors import InputError
from testbed.model.fabric_section import FabricSection
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.model.units import gbps_to_bps, us_to_s
from testbed.network.collectives import (  # noqa: F401 (the oracle's public names, re-exported)
    Breakdown,
    CollectiveCost,
    Prediction,
    collective_cost,
    ina_allreduce_cost,
    ring_allreduce_time_s,
)
from testbed.network.flows import Flow, completion_times
from testbed.oracle.byteps import byteps_time_s
from testbed.oracle.fabrics import mp_flow_model
from testbed.oracle.iteration import predict_plan_fused
from testbed.oracle.retune_threshold import with_retune_threshold
from testbed.planning.byteps_schedule import instances, local_steps_us
from testbed.planning.jobs import JobPrediction, combined_schedule, job_times
from testbed.planning.workloads import model_plan, model_schedule, schedule_for


def predict_ina_fabric(scenario: Scenario, schedule: Schedule, timing: InaRunTiming = InaRunTiming()) -> Prediction:
    """The ina fabric: the node is a non-blocking switch with a port of B per GPU, so a ring (or
    any collective) of each job costs what it costs on Elect-Flat; INA all-reduce uses the node.
    With loss on the fabric, INA's window protocol is simulated (at a run's `timing`): each lost
    packet holds its worker's window until its retransmission timeout."""
    fabric, first = scenario.fabric, schedule.gpus[0].steps[0].collective()
    assert isinstance(fabric, InaFabric), "predict_ina_fabric predicts an ina fabric"
    rate, latency = gbps_to_bps(fabric.gpu_bandwidth_gbps), us_to_s(fabric.latency_us)
    n = len(first.group)
    retransmission_s = 0.0
    if first.algorithm == "ina":
        share = gbps_to_bps(fabric.aggregation_gbps) / schedule.hosts if fabric.aggregation_gbps else None
        ina_rate = min(rate, share or rate)
        cost = ina_allreduce_cost(n, first.bytes, rate, latency, share)
        collisions = 0.0
        if fabric.sharing == "shared":
            shared_s, collisions = shared_slots(fabric, n, first.bytes, ina_rate, latency)
            cost = CollectiveCost(shared_s, cost.smallest_message_bytes, cost.messages,
                                  cost.formula + f"; shared slots simulated: {collisions:.1%} of the chunks collide "
                                  f"and are summed by worker 0, whose link carries them")
        if fabric.loses_packets():
            lossy_s, retransmits = lossy_ina_time_s(fabric, n, first.bytes, ina_rate, latency, scenario.seed, timing)
            lossy_s *= 1 + collisions * (n - 1)
            retransmission_s = max(0.0, lossy_s - cost.time_s)
            cost = CollectiveCost(cost.time_s + retransmission_s, cost.smallest_message_bytes, cost.messages,
                                  cost.formula + f"; loss: the window protocol simulated, about {retransmits} "
                                  f"retransmissions per iteration")
    else:
        cost = collective_cost(first.op, first.algorithm, n, first.bytes, rate, latency)
    jobs = schedule.hosts // n
    formula = f"{first.op} ({first.algorithm}): {cost.formula}" + (f"; {jobs} jobs at once" if jobs > 1 else "")
    return Prediction(cost.time_s, Breakdown(communication_s=cost.time_s - retransmission_s,
                                             retransmission_s=retransmission_s), formula)


# Placed models up to this many GPUs (what a run can emulate) are predicted by simulating their
# schedule step by step, re-planning where the fabric does; beyond, by the placer's estimate.
SIMULATED_MODEL_HOSTS = 128


def predict_scenario(scenario: Scenario) -> Prediction:
    """The oracle for any scenario, the one a run is judged against: a placed model's schedule
    simulated step by step (with the controller's re-plans), traces likewise, collectives directly."""
    if scenario.workload.kind == "model":
        plan = model_plan(scenario)
        estimate, fusion_bytes = predict_plan_fused(plan, scenario.fabric)
        if scenario.fabric.hosts > SIMULATED_MODEL_HOSTS:
            return estimate
        schedule = model_schedule(scenario, plan, fusion_bytes)
        simulated = with_retune_threshold(schedule.to_json(), scenario.fabric).prediction
        # The placer searches with its closed-form estimate (one MP group and its DP ring, fast
        # enough for thousands of candidates); the prediction is the simulation of what runs.
        return Prediction(simulated.iteration_time_s, simulated.breakdown,
                          f"{simulated.formula}; the placer's estimate {estimate.iteration_time_s * 1e3:.3f} ms "
                          f"({estimate.formula})")
    if scenario.workload.kind == "jobs":
        return predict_jobs(scenario)[0]
    if scenario.workload.kind in ("trace", "chakra"):  # a user's schedule, simulated step by step
        return with_retune_threshold(schedule_for(scenario).to_json(), scenario.fabric).prediction
    return predict(scenario, schedule_for(scenario))


def predict_jobs(scenario: Scenario) -> tuple[Prediction, list[JobPrediction]]:
    """Several jobs simulated together (every job's iteration starts at once; the round ends with
    the slowest), and each alone on the same fabric with the other jobs' GPUs idle."""
    together = with_retune_threshold(schedule_for(scenario).to_json(), scenario.fabric)
    times = job_times(scenario, together.gpu_end_s)
    jobs = []
    for job, gpus in scenario.job_gpus():
        alone = with_retune_threshold(combined_schedule(scenario, schedule_for, only=job.name).to_json(),
                                      scenario.fabric)
        alone_s = job_times(scenario, alone.gpu_end_s)[job.name]
        jobs.append(JobPrediction(job.name, tuple(gpus), times[job.name], alone_s))
    said = ", ".join(f"{j.name} {j.together_s * 1e3:.3f} ms (alone {j.alone_s * 1e3:.3f})" for j in jobs)
    prediction = together.prediction
    return Prediction(prediction.iteration_time_s, prediction.breakdown,
                      f"{prediction.formula}; jobs together: {said}"), jobs


def predict(scenario: Scenario, schedule: Schedule) -> Prediction:
    """Predict one iteration of a collective schedule; InputError for pairs the oracle does not model."""
    fabric = scenario.fabric
    if scenario.workload.kind == "collective" and scenario.workload.algorithm in ("byteps", "ps"):
        return predict_byteps(scenario, schedule)
    steps = [step for gpu in schedule.gpus for step in gpu.steps]
    if not all(s.kind == "collective" for s in steps):
        raise InputError(f"{scenario.name}: predict(scenario, schedule) is for collective schedules")
    first = steps[0].collective()
    if KINDS[fabric.kind].aggregation_node:
        return predict_ina_fabric(scenario, schedule)
    if not KINDS[fabric.kind].non_blocking:
        if first.algorithm != "ring" or first.op not in RING_STEP_OPS:
            raise InputError(f"{scenario.name}: on {fabric.kind} the oracle models ring all-reduce, reduce-scatter "
                             f"and all-gather; {first.op} ({first.algorithm}) is modelled on elect-flat only")
        return _ring_on_fabric(first.op, len(first.group), first.bytes, fabric, schedule.traffic())
    cost = collective_cost(first.op, first.algorithm, len(first.group), first.bytes,
                           gbps_to_bps(fabric.gpu_bandwidth_gbps), us_to_s(fabric.latency_us))
    return Prediction(
        iteration_time_s=cost.time_s,
        breakdown=Breakdown(communication_s=cost.time_s),
        formula=f"{first.op} ({first.algorithm}): {cost.formula}",
    )


def predict_byteps(scenario: Scenario, schedule: Schedule) -> Prediction:
    """BytePS or a classic PS: chunk pushes and pulls simulated over the fabric's flow model, plus
    the intra-server local steps on Elect-Cluster."""
    fabric = scenario.fabric
    found = instances(scenario)
    model = mp_flow_model(fabric, schedule.hosts, 1, schedule.traffic())
    network_s = byteps_time_s(found, model, us_to_s(fabric.latency_us))
    local_s = us_to_s(sum(local_steps_us(scenario)))
    first = found[0]
    formula = (f"allreduce ({scenario.workload.algorithm}): {len(first.group)} GPU machines, "
               f"{len(first.services)} CPU machines, {first.chunks} chunks hashed to summation services; "
               f"pushes and pulls as max-min fair flows, alpha per message")
    if local_s:
        formula += f"; {len(found)} instances over the uplinks, intra-server steps {local_s * 1e3:.3g} ms"
    return Prediction(network_s + local_s, Breakdown(compute_s=local_s, communication_s=network_s), formula)


RING_STEP_OPS = {"allreduce": 2, "reducescatter": 1, "allgather": 1}  # passes of n-1 steps


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

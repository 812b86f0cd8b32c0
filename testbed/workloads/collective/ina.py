"""A collective on an ina fabric: the aggregation node's jobs of workers, INA all-reduce's
prediction (reserved or shared slots, loss and its window protocol) and a run's sizing, capped by
the packet rate this machine's node program answered."""

from __future__ import annotations

from testbed.core.calibration import Calibration
from testbed.core.dilation import MIN_MESSAGE_BYTES
from testbed.core.shaping import MTU_FRAME_BYTES, TCP_PAYLOAD_BYTES
from testbed.fabrics.ina.node_links import (
    INA_MIN_CHUNKS,
    InaRunTiming,
    ina_window,
    lossy_ina_time_s,
    max_worker_rate_bps,
    shared_slots,
    window_slowdown,
    worker_rate_cap_bps,
)
from testbed.fabrics.ina.section import InaFabric
from testbed.model.errors import InputError
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule, as_collective
from testbed.model.units import gbps_to_bps, us_to_s
from testbed.network.collectives import (
    Breakdown,
    CollectiveCost,
    Prediction,
    collective_cost,
    ina_allreduce_cost,
)
from testbed.shared.ina_rules import FRAME_BYTES, PAYLOAD_BYTES
from testbed.workloads.collective.section import CollectiveWorkload
from testbed.workloads.sizing import Prepared, emulation_plan


def job_size(scenario: Scenario, workload: CollectiveWorkload) -> int:
    """GPUs per job: an ina fabric may carry several jobs of workers_per_job GPUs each, all running
    at once, and the node's pool must hold every job's window."""
    fabric, hosts = scenario.fabric, scenario.fabric.hosts
    if not isinstance(fabric, InaFabric):
        return hosts
    per_job = fabric.workers_per_job or hosts
    if workload.algorithm == "ina":
        try:
            ina_window(fabric, per_job)
        except InputError as error:
            raise InputError(f"{scenario.name}: {error}") from None
    return per_job


def predict_ina_fabric(scenario: Scenario, schedule: Schedule, timing: InaRunTiming = InaRunTiming()) -> Prediction:
    """The ina fabric: the node is a non-blocking switch with a port of B per GPU, so a ring (or
    any collective) of each job costs what it costs on Elect-Flat; INA all-reduce uses the node.
    With loss on the fabric, INA's window protocol is simulated (at a run's `timing`): each lost
    packet holds its worker's window until its retransmission timeout."""
    fabric, first = scenario.fabric, as_collective(schedule.gpus[0].steps[0])
    assert isinstance(fabric, InaFabric), "predict_ina_fabric predicts an ina fabric"
    rate, latency = gbps_to_bps(fabric.gpu_bandwidth_gbps), us_to_s(fabric.latency_us)
    n = len(first.group)
    retransmission_s = 0.0
    if first.algorithm == "ina":
        share = gbps_to_bps(fabric.aggregation_gbps) / schedule.hosts if fabric.aggregation_gbps else None
        ina_rate = min(rate, share or rate)
        cost = ina_allreduce_cost(n, first.bytes, rate, latency, share, window_chunks=ina_window(fabric, n)[1])
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


def ina_rate_cap_bps(scenario: Scenario, calibration: Calibration) -> float:
    """The fastest a worker may send so that the node program keeps up with every worker's packets."""
    return max_worker_rate_bps(scenario.fabric.hosts, calibration.node_packets_per_s)


def size_ina(scenario: Scenario, schedule: Schedule, prediction: Prediction, calibration: Calibration,
             buffer_bytes: float) -> Prepared:
    """INA all-reduce: one round of M each way per worker, in packets the node program must keep
    up with, so the emulated rate is also capped by the node's packet rate. A busy worker receives
    results at the rate its port carries INA payload."""
    fabric, size = scenario.fabric, float(as_collective(schedule.gpus[0].steps[0]).bytes)
    assert isinstance(fabric, InaFabric), "an aggregation node's fabric is an ina fabric"
    shortest = prediction.iteration_time_s / 2  # the data round; the exponent round is about α
    workers = len(as_collective(schedule.gpus[0].steps[0]).group)
    cap = worker_rate_cap_bps(fabric, workers, calibration.node_packets_per_s)
    lossy = fabric.loses_packets()
    floor = max(MIN_MESSAGE_BYTES, INA_MIN_CHUNKS * PAYLOAD_BYTES)
    plan = emulation_plan(scenario, schedule, prediction, calibration, shortest, size, cap, exact_packets=lossy,
                          min_message_bytes=floor, buffer_bytes=buffer_bytes)
    if lossy:  # lost packets wait out timers whose floor is wall time: the run's own dilation
        dilation = plan.dilation
        prediction = predict_ina_fabric(scenario, schedule, InaRunTiming.of_run(dilation.dilation, dilation.byte_scale))
    payload_share = (PAYLOAD_BYTES / FRAME_BYTES) * (MTU_FRAME_BYTES / TCP_PAYLOAD_BYTES)
    # A window that idles the link sends at 1/slowdown of the port's rate however busy.
    expected = plan.host_rate_bps * payload_share / window_slowdown(fabric, workers)
    if fabric.aggregation_gbps:
        share = fabric.aggregation_gbps / fabric.hosts / fabric.gpu_bandwidth_gbps
        expected = min(expected, plan.host_rate_bps * share)
    # With shared slots everyone also waits on the fallback host: the run applies the collisions it
    # counted (results.collided_share).
    return Prepared(scenario, schedule, prediction, plan, shortest, size, expected,
                    ina_node_packets_per_s=calibration.node_packets_per_s, min_message_bytes=floor)



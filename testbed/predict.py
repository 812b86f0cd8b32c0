"""Analytic oracle: the expected real-world iteration time of a schedule on a fabric (alpha-beta)."""

from __future__ import annotations

import math
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


@dataclass(frozen=True)
class CollectiveCost:
    time_s: float
    smallest_message_bytes: float
    messages: int  # on the critical path
    formula: str


def collective_cost(op: str, algorithm: str, n: int, size_bytes: float, rate_bps: float,
                    latency_s: float) -> CollectiveCost:
    """Alpha-beta time of one collective among n GPUs, each with a buffer of `size_bytes` (M)."""
    M, a = size_bytes, latency_s
    t = lambda size: transfer_time_s(size, rate_bps)  # noqa: E731
    rounds = math.ceil(math.log2(n)) if n > 1 else 0
    if (op, algorithm) == ("allreduce", "ring"):
        return CollectiveCost(ring_allreduce_time_s(n, M, rate_bps, a), M / n, 2 * (n - 1),
                              "2(n-1)·α + 2(n-1)/n·M/B")
    if (op, algorithm) == ("allreduce", "halving-doubling"):
        p2 = 1 << (n.bit_length() - 1)
        steps = 2 * int(math.log2(p2))
        time = steps * a + 2 * (p2 - 1) / p2 * t(M)
        formula = "2·log2(p)·α + 2(p-1)/p·M/B, p = 2^floor(log2 n)"
        if p2 != n:  # the n - p extra ranks fold their data in first and get the result back last
            time += 2 * (a + t(M))
            steps += 2
            formula += " + 2(α + M/B)"
        return CollectiveCost(time, M / p2, steps, formula)
    if (op, algorithm) == ("allreduce", "tree"):
        return CollectiveCost(2 * rounds * (a + t(M)), M, 2 * rounds, "2·ceil(log2 n)·(α + M/B)")
    if (op, algorithm) in (("reducescatter", "ring"), ("allgather", "ring")):
        return CollectiveCost((n - 1) * (a + t(M / n)), M / n, n - 1, "(n-1)·α + (n-1)/n·M/B")
    if (op, algorithm) == ("broadcast", "tree"):
        return CollectiveCost(rounds * (a + t(M)), M, rounds, "ceil(log2 n)·(α + M/B)")
    if (op, algorithm) == ("alltoall", "ring"):
        return CollectiveCost((n - 1) * (a + t(M / n)), M / n, n - 1, "(n-1)·(α + M/(n·B))")
    if (op, algorithm) == ("sendrecv", "ring"):
        return CollectiveCost(a + t(M), M, 1, "α + M/B")
    raise InputError(f"no alpha-beta model for {op} with algorithm {algorithm}")


def ina_allreduce_cost(n: int, size_bytes: float, rate_bps: float, latency_s: float,
                       worker_rate_bps: float | None = None, collision_frac: float = 0.0) -> CollectiveCost:
    """INA all-reduce of float32 buffers: a MAX round of one exponent per chunk, then the chunks;
    each round one message (α), each worker sends M and receives M at once (full duplex), in INA
    packets whose header overhead differs from TCP's. `worker_rate_bps` caps the rate when the
    node aggregates slower than its ports (aggregation_gbps shared by all workers). With shared
    slots, a share f of the chunks collides and is summed by worker 0: its link then carries
    M·(1 + f·(n−1)) each way, and everyone waits for it."""
    from hosts.ina.protocol import ELEMENTS_PER_PACKET, FRAME_BYTES, PAYLOAD_BYTES
    from testbed.shaping import MTU_FRAME_BYTES, TCP_PAYLOAD_BYTES

    rate = min(rate_bps, worker_rate_bps) if worker_rate_bps else rate_bps
    chunks = math.ceil(size_bytes / PAYLOAD_BYTES)
    exponent_packets = math.ceil(chunks / ELEMENTS_PER_PACKET)
    # The link carries rate·1514/1448 bits/s of frames; INA frames are FRAME_BYTES per chunk.
    wire_s = (chunks + exponent_packets) * FRAME_BYTES * 8 / (rate * MTU_FRAME_BYTES / TCP_PAYLOAD_BYTES)
    formula = "2·α + (M + M/P)·(INA frame/payload)/B, P elements per packet"
    if collision_frac:
        wire_s *= 1 + collision_frac * (n - 1)
        formula += f"; ×(1 + f·(n−1)) for the fallback host, f = {collision_frac:.3f}"
    return CollectiveCost(2 * latency_s + wire_s, size_bytes, 2, formula)


def predict_ina_fabric(scenario: Scenario, schedule: Schedule) -> Prediction:
    """The ina fabric: the node is a non-blocking switch with a port of B per GPU, so a ring (or
    any collective) of each job costs what it costs on Elect-Flat; INA all-reduce uses the node."""
    fabric, first = scenario.fabric, schedule.gpus[0].steps[0]
    rate, latency = gbps_to_bps(fabric.gpu_bandwidth_gbps), us_to_s(fabric.latency_us)
    n = len(first.group)
    if first.algorithm == "ina":
        from testbed.ina_fabric import collision_fraction

        share = gbps_to_bps(fabric.aggregation_gbps) / schedule.hosts if fabric.aggregation_gbps else None
        cost = ina_allreduce_cost(n, first.bytes, rate, latency, share, collision_fraction(fabric, n))
    else:
        cost = collective_cost(first.op, first.algorithm, n, first.bytes, rate, latency)
    jobs = schedule.hosts // n
    formula = f"{first.op} ({first.algorithm}): {cost.formula}" + (f"; {jobs} jobs at once" if jobs > 1 else "")
    return Prediction(cost.time_s, Breakdown(communication_s=cost.time_s), formula)


def predict_scenario(scenario: Scenario) -> Prediction:
    """The oracle for any scenario: placed models through the placer's plan, collectives directly."""
    if scenario.workload.kind == "model":
        from testbed.oracle.iteration import predict_plan
        from testbed.schedule import model_plan

        return predict_plan(model_plan(scenario), scenario.fabric)
    from testbed.schedule import schedule_for

    if scenario.workload.kind == "trace":  # a user's schedule: simulated step by step, like a placed one
        from testbed.oracle.schedule_sim import simulate_schedule

        return simulate_schedule(schedule_for(scenario).to_json(), scenario.fabric)
    return predict(scenario, schedule_for(scenario))


def predict(scenario: Scenario, schedule: Schedule) -> Prediction:
    """Predict one iteration of a collective schedule; InputError for pairs the oracle does not model."""
    fabric = scenario.fabric
    if scenario.workload.kind == "collective" and scenario.workload.algorithm in ("byteps", "ps"):
        return predict_byteps(scenario, schedule)
    steps = [step for gpu in schedule.gpus for step in gpu.steps]
    if not all(s.kind == "collective" for s in steps):
        raise InputError(f"{scenario.name}: predict(scenario, schedule) is for collective schedules")
    first = steps[0]
    if fabric.kind == "ina":
        return predict_ina_fabric(scenario, schedule)
    if fabric.kind != "elect-flat":
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
    from testbed.byteps_schedule import instances, local_steps_us
    from testbed.oracle.byteps import byteps_time_s
    from testbed.oracle.fabrics import mp_flow_model

    fabric = scenario.fabric
    found = instances(scenario)
    model = mp_flow_model(fabric, schedule.hosts, 1, schedule.traffic())
    network_s = byteps_time_s(found, model, us_to_s(fabric.latency_us))
    local_s = sum(local_steps_us(scenario)) * 1e-6
    first = found[0]
    formula = (f"allreduce ({scenario.workload.algorithm}): {len(first.group)} GPU machines, "
               f"{len(first.services)} CPU machines, {first.chunks} chunks hashed to summation services; "
               f"pushes and pulls as max-min fair flows, alpha per message")
    if local_s:
        formula += f"; {len(found)} instances over the uplinks, intra-server steps {local_s * 1e3:.3g} ms"
    return Prediction(network_s + local_s, Breakdown(compute_s=local_s, communication_s=network_s), formula)


RING_STEP_OPS = {"allreduce": 2, "reducescatter": 1, "allgather": 1}  # passes of n-1 steps


def _ring_on_fabric(op: str, n: int, size_bytes: float, fabric, traffic: dict) -> Prediction:
    """A ring collective on any fabric: every step, each GPU sends M/n to the next at once, so a
    step takes as long as the slowest of those n concurrent transfers over the fabric's paths
    (circuits, lightpaths, uplinks), shared max-min fairly."""
    from testbed.oracle.fabrics import mp_flow_model
    from testbed.oracle.flows import Flow, completion_times

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

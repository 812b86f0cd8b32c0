"""BytePS and classic PS: the prediction (chunk pushes and pulls over the fabric's flow model, plus
the intra-server steps on Elect-Cluster) and how a run of it is sized."""

from __future__ import annotations

from testbed.core.calibration import Calibration
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.model.units import gbps_to_bps, transfer_time_s, us_to_s
from testbed.network.collectives import Breakdown, Prediction
from testbed.oracle.fabrics import mp_flow_model
from testbed.workloads.collective.byteps.oracle import byteps_time_s
from testbed.workloads.collective.byteps.schedule import instances, local_steps_us
from testbed.workloads.collective.section import CollectiveWorkload
from testbed.workloads.sizing import Prepared, emulation_plan


def predict_byteps(scenario: Scenario, workload: CollectiveWorkload, schedule: Schedule) -> Prediction:
    """BytePS or a classic PS: chunk pushes and pulls simulated over the fabric's flow model, plus
    the intra-server local steps on Elect-Cluster."""
    fabric = scenario.fabric
    found = instances(scenario, workload)
    model = mp_flow_model(fabric, schedule.hosts, 1, schedule.traffic())
    network_s = byteps_time_s(found, model, us_to_s(fabric.latency_us))
    local_s = us_to_s(sum(local_steps_us(scenario, workload)))
    first = found[0]
    formula = (f"allreduce ({workload.algorithm}): {len(first.group)} GPU machines, "
               f"{len(first.services)} CPU machines, {first.chunks} chunks hashed to summation services; "
               f"pushes and pulls as max-min fair flows, alpha per message")
    if local_s:
        formula += f"; {len(found)} instances over the uplinks, intra-server steps {local_s * 1e3:.3g} ms"
    return Prediction(network_s + local_s, Breakdown(compute_s=local_s, communication_s=network_s), formula)


def size_byteps(scenario: Scenario, workload: CollectiveWorkload, schedule: Schedule, prediction: Prediction,
                calibration: Calibration) -> Prepared:
    """BytePS/PS: its messages are the chunks; a busy link should see the share of the iteration
    that its node's bytes take at the full rate (the load split keeps that share equal)."""
    fabric = scenario.fabric
    rate_bps = gbps_to_bps(fabric.gpu_bandwidth_gbps)
    chunk = min(i.size_bytes / i.chunks for i in instances(scenario, workload))
    shortest = us_to_s(fabric.latency_us) + transfer_time_s(chunk, rate_bps)
    plan = emulation_plan(scenario, schedule, prediction, calibration, shortest, chunk,
                          buffer_bytes=float(workload.bytes))
    # Only the busiest machines report a rate (hosts/byteps.py): they receive the most.
    received = max(sum(column) for column in zip(*schedule.traffic_matrix_bytes))
    busy_s = transfer_time_s(received, rate_bps) / max(1e-12, prediction.breakdown.communication_s)
    return Prepared(scenario, schedule, prediction, plan, shortest, chunk, plan.host_rate_bps * min(1.0, busy_s))

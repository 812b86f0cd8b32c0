"""Properties of the plan oracle across bandwidths (SiP-ML's sweep varies B alone): a plan is never
slower on a faster fabric of the same kind, and no fabric runs it faster than Elect-Flat, whose
every GPU has B to every other, unless fair sharing reorders one GPU's transfers to several GPUs
(test_fair_sharing_can_favour_less_capacity shows how)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from testbed.model.errors import InputError
from testbed.network.flows import FREEZE_TOLERANCE, Flow, completion_times
from testbed.oracle.iteration import predict_plan
from testbed.placer.plan import make_plan
from testbed.planning.scenario_file import make_fabric

from .test_placer import SMALL, random_graphs

WAVELENGTHS = 8


def fabric(kind: str, gpus: int, gbps: float):
    common = dict(hosts=gpus, gpu_bandwidth_gbps=gbps, latency_us=2)
    if kind == "elect-cluster":  # the uplinks stay as they are: only the GPUs' B changes
        return make_fabric(kind=kind, gpus_per_server=4, server_uplink_gbps=100, **common)
    if kind == "elect-fattree":  # leaves of two GPUs, uplinks at half their B
        return make_fabric(kind=kind, leaf_hosts=2, oversubscription=2, **common)
    if kind == "sip-ocs":
        return make_fabric(kind=kind, ocs_switches=3, **common)
    if kind == "sip-ring":  # B is W wavelengths: a faster GPU has faster wavelengths
        return make_fabric(kind=kind, wavelengths=WAVELENGTHS, wavelength_gbps=gbps / WAVELENGTHS,
                           neighbors=4, **common)
    return make_fabric(kind=kind, **common)


KINDS = ["elect-flat", "elect-cluster", "elect-fattree", "sip-ocs", "sip-ring"]


def fans_out(plan) -> bool:
    """Whether some GPU sends to two or more GPUs for one op: only then can sharing its interface
    fairly (as TCP does) finish a flow the schedule waits on later than a narrower fabric would."""
    receivers: dict[tuple[int, int], set[int]] = {}
    for (q, p, i, dst) in plan.messages:
        receivers.setdefault((i, plan.placement.gpu[q][p]), set()).add(dst)
    return any(len(found) > 1 for found in receivers.values())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(), k=st.sampled_from([1, 2, 4]), l=st.sampled_from([1, 2, 4]),
       per_group=st.integers(1, 8), gbps=st.sampled_from([25, 50, 100, 200, 400]),
       faster=st.sampled_from([2, 4]), kind=st.sampled_from(KINDS))
def test_a_plan_is_never_slower_on_a_faster_fabric_nor_faster_than_elect_flat(graph, k, l, per_group, gbps,
                                                                               faster, kind):
    assume(k * l >= 2)
    try:
        plan = make_plan(graph, SMALL, k, l, per_group * l, 3 if kind == "sip-ocs" else None)
    except InputError:
        return
    slow = predict_plan(plan, fabric(kind, k * l, gbps)).iteration_time_s
    fast = predict_plan(plan, fabric(kind, k * l, gbps * faster)).iteration_time_s
    assert fast <= slow * (1 + 1e-9), (kind, slow, fast)
    if fans_out(plan):
        return
    # Without fan-out every flow into a GPU feeds its one part of the op, and Elect-Flat keeps that
    # GPU's B busy while any is under way: no fabric, whose GPUs take in at most B, delivers the last
    # byte sooner. Max-min filling freezes resources within 1% of the bottleneck together, so one
    # fabric's flows may give up to 1% of a rate that another's, bottlenecked elsewhere, keep.
    flat = predict_plan(plan, fabric("elect-flat", k * l, gbps)).iteration_time_s
    assert flat <= slow * (1 + FREEZE_TOLERANCE), (kind, flat, slow)


def test_fair_sharing_can_favour_less_capacity():
    """Why the bound above needs no fan-out: GPU 0 sends 1 MB to GPU 1 and 1 MB to GPU 2 at
    C = 8 Gb/s. Elect-Flat shares its interface fairly, C/2 each, both done at 2 ms. A fabric whose
    path to GPU 2 crosses a C/4 uplink gives that flow C/4 and the other 3C/4: GPU 1 has its
    bytes at 8 Mb / 6 Gb/s = 1.333 ms, GPU 2 at 8 Mb / 2 Gb/s = 4 ms. If GPU 1 then computes for
    2.5 ms and GPU 2 for nothing, the narrower fabric ends at max(3.833, 4) = 4 ms, Elect-Flat at
    4.5 ms: Graham's timing anomaly of list scheduling, which TCP's sharing has as well."""
    capacity = {("out", 0): 8e9, ("in", 1): 8e9, ("in", 2): 8e9, ("up", 0): 2e9}
    flat = completion_times([Flow(0.0, 1e6, (("out", 0), ("in", 1))), Flow(0.0, 1e6, (("out", 0), ("in", 2)))],
                            capacity)
    narrow = completion_times([Flow(0.0, 1e6, (("out", 0), ("in", 1))),
                               Flow(0.0, 1e6, (("out", 0), ("up", 0), ("in", 2)))], capacity)
    assert flat == pytest.approx([2e-3, 2e-3])
    assert narrow == pytest.approx([4e-3 / 3, 4e-3])
    assert max(flat[0] + 2.5e-3, flat[1]) == pytest.approx(4.5e-3)
    assert max(narrow[0] + 2.5e-3, narrow[1]) == pytest.approx(4e-3)

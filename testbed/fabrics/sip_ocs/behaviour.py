"""SiP-OCS: each GPU has one silicon-photonic interface of B/Q into each of Q optical circuit
switches; circuits are planned from the traffic matrix (once, or every period when multi-shot),
and pairs without a circuit relay through GPUs."""

from __future__ import annotations

from typing import Any

from testbed.fabrics.base import TopologyBuilder, proportional_shares, relayed
from testbed.fabrics.rendering import LinkRules
from testbed.fabrics.sip_ocs.circuits import CircuitPlan, plan_circuits, replan_circuits
from testbed.fabrics.sip_ocs.rules import live_circuits, render_circuits, validate_circuits
from testbed.fabrics.sip_ocs.section import SipOcsFabric
from testbed.model.contracts import Topology
from testbed.model.errors import InputError
from testbed.model.topology import KindLayout, OcsLayout
from testbed.model.units import gbps_to_bps, us_to_s
from testbed.network.flow_model import FlowModel, Traffic, relay_paths, ring_allreduce_s

DEFAULT_OCS_SWITCHES = 16


def ocs_switches(fabric: SipOcsFabric) -> int:
    return fabric.ocs_switches or DEFAULT_OCS_SWITCHES


def build(fabric: SipOcsFabric, builder: TopologyBuilder) -> dict[str, KindLayout]:
    q = ocs_switches(fabric)
    ocs = [builder.add_switch("ocs", fabric.hosts) for _ in range(q)]
    per_circuit = builder.host_rate_bps / q
    for rank in range(fabric.hosts):
        builder.add_host(*(builder.host_link(rank, i, ocs[i], rank + 1, per_circuit) for i in range(q)))
    return {"ocs": OcsLayout(switches=q, circuit_rate_bps=per_circuit)}


def flow_model(fabric: SipOcsFabric, k: int, l: int, traffic: Traffic, dp_bytes: float) -> FlowModel:
    # The one-shot plan covers the DP ring too, in proportion to its share of the iteration's
    # bytes; its circuits out to and in from the counterparts take each GPU's own ports.
    rings = {g: dp_bytes for g in range(k)} if l > 1 and dp_bytes > 0 else None
    return _circuit_model(fabric, k, l, traffic, rings)


def multi_shot_demand(traffic: Traffic, recurring: tuple[tuple[int, int], ...]) -> Traffic:
    """What a multi-shot re-plan serves: the period's traffic, and the job's recurring pairs kept
    with a token demand so that each keeps a circuit or a relay (a pair planned out would be
    unreachable when its turn comes, as a DP ring after a period of MP traffic)."""
    floor = 1e-6 * max(traffic.values(), default=1.0)
    return {**{pair: floor for pair in recurring}, **traffic}


def replan(fabric: SipOcsFabric, k: int, l: int, traffic: Traffic, recurring: tuple[tuple[int, int], ...],
           current: FlowModel | None = None, dark_s: float = 0.0) -> FlowModel:
    """The circuits a multi-shot controller sets for a period's measured traffic, from the plan in
    force (`current`): it retunes only for a gain larger than the `dark_s` a retune costs, as the
    controller does."""
    demand = multi_shot_demand(traffic, recurring)
    if current is None:
        return _circuit_model(fabric, k, 1, demand, None)
    switches = ocs_switches(fabric)
    link = gbps_to_bps(fabric.gpu_bandwidth_gbps) / switches
    held = {(i, j): tuple(range(round(bps / link))) for (kind, i, j), bps in current.capacity_bps.items()
            if kind == "circuit"}
    return _plan_flow_model(k, demand, replan_circuits(demand, k, switches, link, held, dark_s), link)


def _circuit_model(fabric: SipOcsFabric, k: int, l: int, traffic: Traffic, rings: dict[int, float] | None) -> FlowModel:
    switches = ocs_switches(fabric)
    link = gbps_to_bps(fabric.gpu_bandwidth_gbps) / switches
    plan = plan_circuits(traffic, k, switches, link, ring_demand=rings)
    model = _plan_flow_model(k, traffic, plan, link)
    if l > 1:
        model.dp_rate_bps = min(plan.circuits.get((g, g), 0) for g in range(k)) * link
    return model


def _plan_flow_model(k: int, traffic: Traffic, plan: CircuitPlan, link: float) -> FlowModel:
    """Circuits as resources of `link` b/s each; pairs without one relay through GPUs."""
    caps, links = {}, {}
    for (i, j), count in plan.circuits.items():
        if i != j:
            caps[("circuit", i, j)] = count * link
            links[(i, j)] = ("circuit", i, j)
    try:
        paths = relay_paths(k, links, traffic)
    except ValueError as error:  # the ports went to heavier pairs and left two groups apart
        peers = max(sum(1 for pair in traffic if pair[0] == g and pair[1] != g) for g in range(k))
        raise InputError(f"the circuit plan leaves some GPUs unreachable ({error}): a GPU has one port per "
                         f"switch and here talks to up to {peers} others, and the heaviest pairs took every "
                         f"port; raise fabric.ocs_switches to {peers} or more") from None
    model = FlowModel(caps, paths)
    model.notes.append(f"circuits by {plan.method}; longest transfer {plan.longest_s * 1e3:.3f} ms, "
                       f"bound {plan.bound_s * 1e3:.3f} ms")
    return model


def dp_allreduce_s(fabric: SipOcsFabric, k: int, l: int, grad_bytes: float, planned_rate_bps: float | None) -> float:
    B = gbps_to_bps(fabric.gpu_bandwidth_gbps)
    rate = planned_rate_bps if planned_rate_bps is not None else B / ocs_switches(fabric)
    return ring_allreduce_s(l, grad_bytes, rate, us_to_s(fabric.latency_us))


# Multi-shot re-plans at most this many reconfiguration times apart, so dark time stays a small
# share of the period unless the scenario sets estimate_period_us.
OCS_PERIOD_PER_RECONFIG = 10
def controller_plan(topology: Topology, fabric: SipOcsFabric, traffic: Traffic, recurring: tuple[tuple[int, int], ...],
                    current: dict[Any, int] | None = None, dark_s: float = 0.0) -> dict[Any, int]:
    """Circuits `(switch, src, dst) -> 1` for a traffic matrix, as the oracle's multi-shot re-plans
    choose them: the job's recurring pairs keep a circuit (or a relay), and with `current` (the
    state in force) circuits keep their switches and change only for a gain over `dark_s`."""
    n, q = len(topology.hosts), ocs_switches(fabric)
    link_bps = gbps_to_bps(fabric.gpu_bandwidth_gbps) / q
    demand = multi_shot_demand(traffic, recurring)
    if current is None:
        circuits = plan_circuits(demand, n, q, link_bps)
    else:
        held: dict[tuple[int, int], list[int]] = {}
        for switch, i, j in live_circuits(current):
            held.setdefault((i, j), []).append(switch)
        circuits = replan_circuits(demand, n, q, link_bps, {p: tuple(sorted(qs)) for p, qs in held.items()}, dark_s)
    return {(switch, i, j): 1 for (i, j), switches in circuits.switch_of.items() for switch in switches}


def shares(fabric: SipOcsFabric, sizes: list[int]) -> list[tuple[SipOcsFabric, int]]:
    """Each job's optical circuit switches, in proportion to its GPUs: its GPUs' ports on those
    switches alone, each circuit at the rate it has on the whole fabric (B/Q)."""
    q = ocs_switches(fabric)
    counts = proportional_shares(q, sizes, fabric.hosts, "optical switches", "ocs_switches")
    firsts = [sum(counts[:i]) for i in range(len(counts))]
    return [(fabric.model_copy(update={"ocs_switches": count,
                                       "gpu_bandwidth_gbps": fabric.gpu_bandwidth_gbps * count / q}), first)
            for count, first in zip(counts, firsts)]


RULES = LinkRules(
    link_state="circuits",
    validate=lambda topology, state: validate_circuits(topology, live_circuits(state)),
    render=lambda topology, state, rto_ms: render_circuits(topology, live_circuits(state), rto_ms),
    plan=controller_plan,
    pair_of=lambda key: (key[1], key[2]),
    shift=lambda key, offset: (key[0] + offset, key[1], key[2]),
)
BEHAVIOUR = relayed(build, flow_model, dp_allreduce_s, "circuit", ocs_switches, default_reconfig_us=10000.0,
                    period_per_reconfig=OCS_PERIOD_PER_RECONFIG, replan=replan,
                    replans=lambda fabric: fabric.multi_shot, link_rules=RULES, shares=shares)

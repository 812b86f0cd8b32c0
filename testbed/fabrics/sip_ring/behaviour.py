"""SiP-Ring: a silicon-photonic micro-ring ring; each GPU tunes W wavelengths of `wavelength_gbps`
into lightpaths to GPUs within `neighbors` hops, re-planned every estimation period. Emulated as one
switch standing for the fibre ring, whose rules are the lightpaths."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from testbed.fabrics.base import TopologyBuilder, proportional_shares, relayed
from testbed.fabrics.rendering import LinkRules
from testbed.fabrics.sip_ring.rules import init_lines, render_lightpaths, validate_lightpaths
from testbed.fabrics.sip_ring.section import SipRingFabric
from testbed.fabrics.sip_ring.wavelengths import WavelengthPlan, plan_wavelengths
from testbed.model.contracts import Topology
from testbed.model.topology import KindLayout, RingLayout
from testbed.model.units import gbps_to_bps, us_to_s
from testbed.network.flow_model import FlowModel, Traffic, paths_over, ring_allreduce_s
from testbed.network.link_planner import quantised, worth_retuning
from testbed.network.relay import Relays


def build(fabric: SipRingFabric, builder: TopologyBuilder) -> dict[str, KindLayout]:
    assert fabric.wavelengths is not None  # a sip-ring fabric's validation requires it
    builder.one_switch("ring", fabric.hosts)
    return {"ring": RingLayout(wavelengths=fabric.wavelengths,
                               wavelength_rate_bps=builder.host_rate_bps / fabric.wavelengths,
                               reach=fabric.neighbors)}


def ring_plan(fabric: SipRingFabric, k: int, traffic: Traffic,
              keep: tuple[tuple[int, int], ...] = ()) -> WavelengthPlan:
    """The controller's wavelength plan for an estimated traffic matrix: the ring stays connected
    and the job's recurring lightpaths (`keep`) keep a wavelength; the estimate shares the rest."""
    assert fabric.wavelengths is not None
    return plan_wavelengths(traffic, k, fabric.wavelengths, gbps_to_bps(fabric.wavelength_rate_gbps), fabric.neighbors,
                            keep_ring=True, keep=keep)


def ring_nodes(fabric: SipRingFabric, k: int, l: int) -> int:
    """The ring the oracle plans one MP group's k GPUs on. With l > 1 groups, each is a block of k
    consecutive GPUs on the ring of k·l (counterparts are k apart), so its first and last GPUs are
    k - 1 hops apart, not neighbours: the block gets `reach` GPUs of margin on each side, beyond
    which no lightpath of the group can wrap around."""
    if l <= 1:
        return k
    return min(k * l, k + 2 * fabric.neighbors + 1)


def kept_pairs(fabric: SipRingFabric, k: int, l: int, nodes: int,
               pairs: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The job's recurring pairs that keep a lightpath through every re-plan, as the controller
    keeps them: the group's MP pairs and, within reach, its DP ring's (to the next group's
    counterpart k ahead, from the previous group's k behind)."""
    kept = set(pairs)
    if l > 1 and k <= fabric.neighbors:
        for i in range(k):
            kept |= {(i, (i + k) % nodes), ((i - k) % nodes, i)}
    return tuple(sorted(kept))


def ring_flow_model(fabric: SipRingFabric, k: int, plan: WavelengthPlan) -> FlowModel:
    """Lightpaths as resources (k: the ring's GPUs); pairs without one relay hop by hop."""
    wave_bps = gbps_to_bps(fabric.wavelength_rate_gbps)
    caps, links = {}, {}
    for (s, d), path in plan.lightpaths.items():
        caps[("lightpath", s, d)] = len(path.wavelengths) * wave_bps
        links[(s, d)] = ("lightpath", s, d)
    relays = Relays(k, links)
    model = FlowModel(caps, paths_over(relays, links, links))
    model.default = lambda s, d: paths_over(relays, links, [(s, d)])[(s, d)]
    model.notes.append(f"wavelengths by {plan.method}; longest transfer {plan.longest_s * 1e3:.3f} ms, "
                       f"bound {plan.bound_s * 1e3:.3f} ms")
    return model


def flow_model(fabric: SipRingFabric, k: int, l: int, traffic: Traffic, dp_bytes: float) -> FlowModel:
    # The iteration's own pairs are the ones it keeps: the plan of the whole iteration's traffic.
    return replan(fabric, k, l, traffic, tuple(traffic))


def dp_allreduce_s(fabric: SipRingFabric, k: int, l: int, grad_bytes: float, planned_rate_bps: float | None) -> float:
    B = gbps_to_bps(fabric.gpu_bandwidth_gbps)
    assert fabric.wavelengths is not None  # a sip-ring fabric's validation requires it
    if k == 1 and fabric.wavelengths >= 2:
        # Counterparts are ring neighbours: a one-way ring, planned as the collective path and the
        # controller plan it, which keep one wavelength towards the other neighbour (the ring stays
        # connected for traffic the estimate missed): W - 1 of W wavelengths carry the ring.
        rate = B * (fabric.wavelengths - 1) / fabric.wavelengths
    else:
        # Counterparts are k apart: k rings' lightpaths overlap on every segment; both directions used.
        rate = min(B, 2 * B / k) / max(1, math.ceil(k / fabric.neighbors))
    return ring_allreduce_s(l, grad_bytes, rate, us_to_s(fabric.latency_us))


def retuned_ring_plan(fabric: SipRingFabric, nodes: int, traffic: Traffic, keep: tuple[tuple[int, int], ...],
                      held: dict[tuple[int, int], int] | None, dark_s: float) -> WavelengthPlan | None:
    """The wavelength plan for a period's measured traffic, or None where the plan in force
    (`held`: wavelengths per pair) stays because retuning would not gain its `dark_s`."""
    if held is None:
        return ring_plan(fabric, nodes, traffic, keep)
    traffic = quantised(traffic)  # a measured estimate, planned as link_planner rounds it
    plan = ring_plan(fabric, nodes, traffic, keep)
    fresh = {pair: len(path.wavelengths) for pair, path in plan.lightpaths.items()}
    return plan if worth_retuning(traffic, held, fresh, gbps_to_bps(fabric.wavelength_rate_gbps), dark_s) else None


def replan(fabric: SipRingFabric, k: int, l: int, traffic: Traffic, recurring: tuple[tuple[int, int], ...],
           current: FlowModel | None = None, dark_s: float = 0.0) -> FlowModel:
    """The lightpaths the controller tunes for a period's measured traffic, from the plan in force
    (`current`): it retunes only when worth the `dark_s` a retune costs, as the controller does."""
    nodes = ring_nodes(fabric, k, l)
    wave_bps = gbps_to_bps(fabric.wavelength_rate_gbps)
    held = None if current is None else {(s, d): round(bps / wave_bps)
                                         for (kind, s, d), bps in current.capacity_bps.items() if kind == "lightpath"}
    plan = retuned_ring_plan(fabric, nodes, traffic, kept_pairs(fabric, k, l, nodes, recurring), held, dark_s)
    if plan is None:
        assert current is not None
        return current
    return ring_flow_model(fabric, nodes, plan)


def controller_plan(topology: Topology, fabric: SipRingFabric, traffic: Traffic,
                    recurring: tuple[tuple[int, int], ...], current: dict[Any, int] | None = None,
                    dark_s: float = 0.0) -> dict[Any, int]:
    """Lightpaths `(src, dst) -> wavelengths` for a traffic matrix: the plan in force (`current`)
    stays unless retuning gains its `dark_s`, the same rule as the oracle's re-plans."""
    lightpaths = retuned_ring_plan(fabric, len(topology.hosts), traffic, recurring, current, dark_s)
    if lightpaths is None:
        return dict(current or {})
    return {pair: len(path.wavelengths) for pair, path in lightpaths.lightpaths.items()}


def shares(fabric: SipRingFabric, sizes: list[int]) -> list[tuple[SipRingFabric, int]]:
    """Each job's wavelengths, in proportion to its GPUs (a disjoint part of the spectrum: its
    lightpaths never meet another job's on a segment)."""
    counts = proportional_shares(fabric.wavelengths, sizes, fabric.hosts, "wavelengths", "wavelengths")
    return [(fabric.model_copy(update={"wavelengths": count}), 0) for count in counts]


def placement_degree(fabric: SipRingFabric) -> int:
    """The peers a GPU may talk to in a placement: within reach on either side, and no more than
    its W wavelengths can carry at once (one lightpath a peer needs a wavelength of its own)."""
    return min(2 * fabric.neighbors, fabric.wavelengths)


RULES = LinkRules(link_state="lightpaths", validate=validate_lightpaths, render=render_lightpaths,
                  plan=controller_plan, init_lines=init_lines)
BEHAVIOUR = relayed(build, flow_model, dp_allreduce_s, "lightpath", placement_degree,
                    default_reconfig_us=25.0, replan=replan, replans=lambda fabric: True, link_rules=RULES,
                    shares=shares)

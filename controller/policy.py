"""Pure circuit and wavelength policies: the plan a fabric starts with (from the schedule's traffic
matrix) and the plan for a measured traffic matrix. The same planners as the oracle's."""

from __future__ import annotations

from controller.optical_plan import link_state
from testbed.fabrics.all_kinds import behaviour
from testbed.fabrics.sip_ocs.behaviour import multi_shot_demand
from testbed.fabrics.sip_ocs.circuits import plan_circuits, replan_circuits
from testbed.fabrics.sip_ring.behaviour import retuned_ring_plan
from testbed.fabrics.sip_ring.section import SipRingFabric
from testbed.model.contracts import Topology
from testbed.model.fabric_section import FabricSection
from testbed.model.units import gbps_to_bps

POLICIES = ("one-shot", "multi-shot", "periodic")


def plan_for(topology: Topology, fabric: FabricSection, traffic: dict[tuple[int, int], float],
             recurring: tuple[tuple[int, int], ...], current: dict | None = None, dark_s: float = 0.0) -> dict:
    """Link state for a traffic matrix: circuits `(switch, src, dst) -> 1` or lightpaths `(src, dst) -> W`.
    With `current` (the state in force) the plan changes as the oracle's re-plans do: only for a
    gain larger than the `dark_s` a retune costs (testbed.network.link_planner), circuits keeping their switches."""
    n = len(topology.hosts)
    if link_state(topology) == "circuits":
        assert topology.ocs is not None, "a circuit fabric's topology has its ocs layout"
        q = topology.ocs.switches
        # The job's recurring pairs keep a circuit (or a relay), as SiP-Ring keeps their lightpaths;
        # the same demand and planner as the oracle's multi-shot re-plans.
        link_bps = gbps_to_bps(fabric.gpu_bandwidth_gbps) / q
        demand = multi_shot_demand(traffic, recurring)
        if current is None:
            circuits = plan_circuits(demand, n, q, link_bps)
        else:
            held: dict[tuple[int, int], list[int]] = {}
            for (switch, i, j), count in current.items():
                if count > 0:
                    held.setdefault((i, j), []).append(switch)
            circuits = replan_circuits(demand, n, q, link_bps, {p: tuple(sorted(qs)) for p, qs in held.items()},
                                       dark_s)
        return {(switch, i, j): 1 for (i, j), switches in circuits.switch_of.items() for switch in switches}
    assert isinstance(fabric, SipRingFabric), "a fabric of lightpaths is a sip-ring"
    lightpaths = retuned_ring_plan(fabric, n, traffic, recurring, current, dark_s)
    if lightpaths is None:
        return dict(current or {})
    return {pair: len(path.wavelengths) for pair, path in lightpaths.lightpaths.items()}


def default_policy(fabric: FabricSection) -> str:
    if behaviour(fabric.kind).replans(fabric):
        return "multi-shot"
    return "one-shot"

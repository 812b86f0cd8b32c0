"""Pure circuit and wavelength policies: the plan a fabric starts with (from the schedule's traffic
matrix) and the plan for a measured traffic matrix. The same planners as the oracle's."""

from __future__ import annotations

from typing import Any

from testbed.fabrics.sip_ring import ring_plan
from testbed.oracle.circuits import plan_circuits
from testbed.scenario import Fabric
from testbed.units import gbps_to_bps

POLICIES = ("one-shot", "multi-shot", "periodic")


def plan_for(topology: dict[str, Any], fabric: Fabric, traffic: dict[tuple[int, int], float],
             recurring: tuple[tuple[int, int], ...]) -> dict:
    """Link state for a traffic matrix: circuits `(switch, src, dst) -> 1` or lightpaths `(src, dst) -> W`."""
    n = len(topology["hosts"])
    if topology["fabric"] == "sip-ocs":
        q = topology["ocs"]["switches"]
        # The job's recurring pairs keep a circuit (or a relay) even when the last period did not
        # use them, as SiP-Ring keeps their lightpaths: a pair planned out would be unreachable
        # when its turn comes (a DP ring after a period of MP traffic).
        floor = 1e-6 * max(traffic.values(), default=1.0)
        demand = {**{pair: floor for pair in recurring}, **traffic}
        circuits = plan_circuits(demand, n, q, gbps_to_bps(fabric.gpu_bandwidth_gbps) / q)  # as the oracle plans
        return {(switch, i, j): 1 for (i, j), switches in circuits.switch_of.items() for switch in switches}
    lightpaths = ring_plan(fabric, n, traffic, recurring)
    return {pair: len(path.wavelengths) for pair, path in lightpaths.lightpaths.items()}


def default_policy(fabric: Fabric) -> str:
    if fabric.kind == "sip-ring" or (fabric.kind == "sip-ocs" and fabric.multi_shot):
        return "multi-shot"
    return "one-shot"

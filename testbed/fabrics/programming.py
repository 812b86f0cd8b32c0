"""What the controller asks of a topology's kind: its switches' rules, or its link state checked,
planned and rendered. Looks the kind's rule plan up in the registry, so the controller holds no
branch on kinds. Pure."""

from __future__ import annotations

from typing import Any

from testbed.core.shaping import LINUX_RTO_MIN_MS
from testbed.fabrics import partitioned
from testbed.fabrics.all_kinds import behaviour
from testbed.fabrics.rendering import LinkRules, PlanError, Rendering
from testbed.model.contracts import Topology
from testbed.model.fabric_section import FabricSection
from testbed.model.openflow import FlowRule


def switch_rules(topology: Topology) -> dict[int, list[FlowRule]]:
    """Rules per datapath id of a switched kind (links that never change)."""
    return behaviour(topology.fabric).switch_rules(topology)


def link_rules(topology: Topology) -> LinkRules:
    """The rule plan of a reconfigurable kind."""
    found = behaviour(topology.fabric).link_rules
    if found is None:
        raise PlanError(f"fabric {topology.fabric} has no circuits or lightpaths to plan")
    return found


def link_state(topology: Topology) -> str:
    """What the fabric's controller sets: "circuits" or "lightpaths"."""
    return link_rules(topology).link_state


def validate(topology: Topology, state: dict[Any, int]) -> None:
    link_rules(topology).validate(topology, state)


def render(topology: Topology, state: dict[Any, int], rto_ms: int = LINUX_RTO_MIN_MS) -> Rendering:
    return link_rules(topology).render(topology, state, rto_ms)


def init_lines(topology: Topology) -> dict[int, list[str]]:
    """Host configuration applied once, before the first link state."""
    return link_rules(topology).init_lines(topology)


def plan_for(topology: Topology, fabric: FabricSection, traffic: dict[tuple[int, int], float],
             recurring: tuple[tuple[int, int], ...], current: dict[Any, int] | None = None,
             dark_s: float = 0.0, partitions: tuple[tuple[int, ...], ...] = ()) -> dict[Any, int]:
    """Link state for a traffic matrix. With `current` (the state in force) the plan changes as the
    oracle's re-plans do: only for a gain larger than the `dark_s` a retune costs. With
    `partitions` (each job's GPUs, job_sharing: partitioned) each job plans its own share."""
    if partitions:
        return partitioned.link_state(topology, fabric, partitions, traffic, recurring, current, dark_s)
    return link_rules(topology).plan(topology, fabric, traffic, recurring, current, dark_s)

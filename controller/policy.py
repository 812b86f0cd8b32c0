"""The controller's re-planning policies: which one a fabric starts with. The plans themselves are
each kind's (testbed.fabrics.programming.plan_for), the same planners as the oracle's."""

from __future__ import annotations

from testbed.fabrics.all_kinds import behaviour
from testbed.model.fabric_section import FabricSection

POLICIES = ("one-shot", "multi-shot", "periodic")


def default_policy(fabric: FabricSection) -> str:
    if behaviour(fabric.kind).replans(fabric):
        return "multi-shot"
    return "one-shot"

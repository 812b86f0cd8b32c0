"""A fabric's timing, with each kind's defaults where the scenario leaves them: dark time, the
controller's estimation period and retune threshold, and TCP's shortest timeout on its routes."""

from __future__ import annotations

from testbed.core.shaping import LINUX_RTO_MIN_MS, queued_rto_min_ms
from testbed.fabrics.all_kinds import KINDS, behaviour
from testbed.fabrics.rendering import rto_min_ms
from testbed.model.fabric_section import FabricSection, ReconfigurableSection
from testbed.model.units import ms_to_s, us_to_s


def reconfig_us(fabric: FabricSection) -> float:
    """The dark time of a reconfiguration: the scenario's, else the kind's default (0: none)."""
    if isinstance(fabric, ReconfigurableSection) and fabric.reconfig_us is not None:
        return fabric.reconfig_us
    return behaviour(fabric.kind).default_reconfig_us


def route_rto_min_s(fabric: FabricSection, dilation: float, queue_wall_s: float = 0.0) -> float:
    """TCP's shortest retransmission timeout on the fabric's routes, in wall seconds: what a timeout
    costs at least. A kind whose controller re-points links sets it from its dilated dark time
    (rendering.rto_min_ms, as the controller renders its routes); a switched kind's hosts from the
    longest their own queue takes to drain, `queue_wall_s` (shaping.queued_rto_min_ms); INA's
    node keeps Linux's."""
    spec = behaviour(fabric.kind)
    if spec.link_rules is not None:
        return ms_to_s(rto_min_ms(us_to_s(dark_us(fabric)) * dilation))
    if switched_host_routes(fabric.kind):
        return ms_to_s(queued_rto_min_ms(queue_wall_s))
    return ms_to_s(LINUX_RTO_MIN_MS)


def switched_host_routes(kind: str) -> bool:
    """Whether the kind's hosts reach each other over the subnet's one route (switched fabrics),
    whose timeout the set-up raises for the hosts' queues (link_setup.host_commands)."""
    spec = KINDS[kind]
    return not spec.routed and not spec.aggregation_node


def dark_us(fabric: FabricSection) -> float:
    """How long a retuned link stays dark: the reconfiguration, or longer where the controller
    holds it (a controller can always wait before it lights a link again)."""
    held = fabric.dark_hold_us if isinstance(fabric, ReconfigurableSection) else None
    return max(reconfig_us(fabric), held or 0.0)


def retune_threshold_us(fabric: FabricSection) -> float:
    """The gain a re-plan must expect over the next period to retune: the scenario's threshold
    (never below the dark time it costs), else the dark time."""
    dark = dark_us(fabric)
    if isinstance(fabric, ReconfigurableSection) and fabric.retune_threshold_us is not None:
        return max(dark, fabric.retune_threshold_us)
    return dark


def estimate_period_us(fabric: FabricSection) -> float:
    """How often the controller re-plans: the scenario's period, else the kind's rule (a multiple
    of the reconfiguration time; at zero reconfiguration, which would re-plan without end, the
    scenario's default period)."""
    if not isinstance(fabric, ReconfigurableSection):
        return float(ReconfigurableSection.model_fields["estimate_period_us"].default)
    per_reconfig = behaviour(fabric.kind).period_per_reconfig
    if per_reconfig is not None and "estimate_period_us" not in fabric.model_fields_set and reconfig_us(fabric) > 0:
        return per_reconfig * reconfig_us(fabric)
    return fabric.estimate_period_us

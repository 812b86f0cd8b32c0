"""What every fabric kind's scenario section has in common: the base model each kind's section
(testbed/fabrics/<kind>/section.py) extends with its own fields, and the KindSpec it declares,
which the runner, the Mininet shim and the controller's launcher read instead of kind names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from testbed.model.limits import MAX_HOSTS, MAX_LATENCY_US, MAX_RATE_GBPS, MAX_RECONFIG_US


class Strict(BaseModel):
    """Scenario models: unknown keys are errors, values are frozen once validated, numbers finite
    (`.inf` bandwidth predicted a 0.07 ms iteration)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _plain_numbers(cls, data: Any) -> Any:
        """true/false is not a number (pydantic would read it as 1 or 0), and no count, size or
        time a scenario names is beyond 10^18 (a float would overflow on 10^400)."""
        if not isinstance(data, dict):
            return data
        for name, value in data.items():
            field = cls.model_fields.get(name) if isinstance(name, str) else None
            if field is None:
                continue
            if isinstance(value, bool) and not _takes_bool(field.annotation):
                raise ValueError(f"'{name}': {str(value).lower()} is not a value this field takes; give a number "
                                 f"or a name")
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INTEGER:
                raise ValueError(f"'{name}': a number of {len(str(abs(value)))} digits is beyond any count, size "
                                 f"or time (at most 10^18)")
        return data


# Integers beyond this are typos: 10^18 bytes is an exabyte, 10^18 µs thirty thousand years.
MAX_INTEGER = 10**18


def _takes_bool(annotation: Any) -> bool:
    return annotation is bool or annotation is Any or any(_takes_bool(a) for a in get_args(annotation)) \
        or any(isinstance(a, bool) for a in get_args(annotation))


@dataclass(frozen=True)
class KindSpec:
    """A kind's place in the emulation: whether `testbed run` emulates it, which os-ken app programs
    it, and how hosts and the controller treat it."""

    description: str
    emulated: bool = True  # `testbed run` builds it in Mininet (else the oracle alone answers)
    controller_app: str | None = "controller.flat_app"  # None: no switch, so no controller
    routed: bool = False  # hosts route over the fabric's current lightpaths or circuits
    reconfigurable: bool = False  # the controller changes it during a run (northbound API, dark time)
    # GPUs reach one another through an aggregation node program the run starts beside the agents;
    # packets are dropped by that node (its own loss), not by a switch.
    aggregation_node: bool = False
    cpu_machines: bool = False  # ranks after the GPUs are CPU machines (cpu_servers) that sum for BytePS
    # GPUs sit in servers of `gpus_per_server` on a fast local switch: collectives that use CPU
    # machines (BytePS) sum within a server first.
    servers: bool = False
    parameter_server: bool = False  # BytePS and classic PS all-reduce run on it (switched any-to-any)
    non_blocking: bool = False  # one switch with B per GPU each way: the closed-form costs hold exactly
    # The switch port into each host is shaped at B too, as a NIC receives at most B however many
    # peers send to it (a GATHER's senders otherwise reached its root at 7 B: 0.29 of predicted).
    # Off where a circuit or lightpath carries one sender's traffic, held to its rate at that
    # sender, and on the PS fabric, whose CPU machines' TCP incast then loses packets (BytePS:
    # 1.09-1.12 of predicted with 46 retransmission timeouts, against 0.96 and none unshaped).
    shaped_into_hosts: bool = False


class FabricSection(Strict):
    """The scenario's `fabric` section: these fields for every kind, each kind's own beside them."""

    kind: str
    hosts: int = Field(ge=2, le=MAX_HOSTS)  # GPUs (N); at most 1,024 but for workload kinds model and llm
    gpu_bandwidth_gbps: float = Field(gt=0, le=MAX_RATE_GBPS)  # per-GPU bandwidth B, each direction
    latency_us: float = Field(default=1.0, ge=0, le=MAX_LATENCY_US)  # per-message latency (alpha)

    spec: ClassVar[KindSpec]

    def loses_packets(self) -> bool:
        """Whether the fabric itself drops packets on purpose (INA's injected loss)."""
        return False

    def field_warnings(self) -> list[str]:
        """Fields the scenario sets that do not do what they seem to (the kind says which); each
        one sentence naming the field and what to set instead."""
        return []


COMMON_FIELDS = tuple(FabricSection.model_fields)


class ReconfigurableSection(FabricSection):
    """A section of a kind whose controller changes its links during a run (circuits, lightpaths)."""

    # dark time of one change (unset: the kind's)
    reconfig_us: float | None = Field(default=None, ge=0, le=MAX_RECONFIG_US)
    estimate_period_us: float = Field(default=100.0, gt=0, le=MAX_RECONFIG_US)  # how often the controller re-plans
    # A re-plan retunes only when it expects to gain more than this over the next period (unset:
    # the prediction picks a rung at or above reconfig_us, or standing still, and the controller
    # then also holds retuned links dark that long: docs/placer.md says why).
    retune_threshold_us: float | None = Field(default=None, ge=0, le=MAX_RECONFIG_US)
    # How long the controller keeps a retuned link dark, never less than reconfig_us (unset:
    # reconfig_us, or the rung the prediction picks where retune_threshold_us is unset too).
    dark_hold_us: float | None = Field(default=None, ge=0, le=MAX_RECONFIG_US)

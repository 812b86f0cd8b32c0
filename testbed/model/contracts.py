"""What crosses a process boundary, as versioned models: the runner, the controller and the host
agents write these files through them (validated) and read them back through them (parsed).

A file whose `version` a reader does not know is refused with one sentence, not misread: a
controller or agent from another checkout must not guess at fields.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from testbed.model.topology import (
    ClusterLayout,
    FattreeLayout,
    HostSpec,
    InaLayout,
    KindLayout,
    LinkSpec,
    OcsLayout,
    RingLayout,
    SwitchSpec,
)

VERSION: Literal[1] = 1

C = TypeVar("C", bound="Contract")
L = TypeVar("L", bound=KindLayout)


class ContractError(ValueError):
    """A file that crossed a process boundary does not match its contract."""


class Contract(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = VERSION

    def dumps(self) -> str:
        return self.model_dump_json(indent=1, exclude_none=True)

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)

    @classmethod
    def loads(cls: type[C], text: str, where: str = "") -> C:
        try:
            return cls.model_validate_json(text)
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "(the whole file)"
            raise ContractError(f"{where or cls.__name__}: {field}: {first['msg']} (expected a {cls.__name__} "
                                f"version {VERSION} as this checkout writes it)") from None


class InaAgentSettings(BaseModel):
    """How a host agent speaks to the aggregation node."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node: str
    window: int = Field(gt=0)
    rto_s: float = Field(gt=0)
    min_rto_s: float = Field(gt=0)
    link_rate_bps: float | None = Field(default=None, gt=0)  # the link's shaped frame rate; None: no hold


class InaNodeConfig(Contract):
    """ina_node_config.json: the aggregation node program's slots, sharing, and where it reports."""

    pool_slots: int = Field(gt=0)
    sharing: Literal["reserved", "shared"]
    drop_frac: float = Field(default=0.0, ge=0, lt=1)
    seed: int = 0
    aggregation_bps: float | None = Field(default=None, gt=0)  # emulated input rate; None: line rate
    link_rate_bps: float | None = Field(default=None, gt=0)  # the ports' shaped frame rate; None: no hold
    address: str = "0.0.0.0"
    data_port: int | None = None  # the protocol's ports unless given
    control_port: int | None = None
    ready: str
    counters: str


class AgentJob(BaseModel):
    """One job's hosts and measured iterations: its agents keep their own pace, with a barrier
    among themselves alone before each round."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hosts: list[int] = Field(min_length=1)
    iterations: int = Field(ge=1)


class AgentConfig(Contract):
    """agent_config.json: what every host agent needs to replay its part of the schedule."""

    rank_addresses: list[str] = Field(min_length=1)
    port: int = Field(gt=0, lt=65536)
    dilation: float = Field(gt=0)
    byte_scale: float = Field(gt=0)
    latency_s: float = Field(ge=0)
    seed: int
    warmup_iterations: int = Field(ge=0)
    epoch_monotonic_s: float
    schedule: str  # the path of schedule.json
    out_dir: str
    progress: str | None = None  # the file of per-round progress lines the runner watches
    connect_timeout_s: float = Field(default=30.0, gt=0)
    ina: InaAgentSettings | None = None
    niceness: int = Field(default=0, ge=0, le=19)  # the agent's nice value and its session's (hosts.timing)
    # Several jobs: each iterates at its own pace and, after its measured iterations, keeps
    # loading the fabric until every job has its own; none measures before every job has warmed
    # up (both read from the `progress` lines). Empty: one job of every host.
    jobs: list[AgentJob] = []


class ControllerConfig(Contract):
    """controller_config.json: where the controller finds the topology and writes what it did."""

    topology: str
    ready: str
    host_pids: str
    host_logs: str
    fabric: dict[str, Any]  # the scenario's fabric section, validated again by the scenario model
    dilation: float | None = Field(default=None, gt=0)  # reconfigurable fabrics from here on
    byte_scale: float = Field(default=1.0, gt=0)  # wall bytes per emulated byte, to read the counters
    slowness: float = Field(default=1.0, ge=1)  # the calibration's: stretches waits for switches and hosts
    schedule: str | None = None
    events: str | None = None


class ControllerReady(Contract):
    """controller.ready: every switch is programmed (and, where hosts are configured, they are)."""

    switches: list[int]
    time: float
    api: str | None = None  # the northbound API of a reconfigurable fabric
    unreachable: list[tuple[int, int]] = []


class Topology(Contract):
    """topology.json: the emulated network, built before it exists, with its kind's own layout."""

    fabric: str
    datapath: Literal["user", "kernel"]
    host_rate_bps: float = Field(gt=0)
    switches: tuple[SwitchSpec, ...]
    hosts: tuple[HostSpec, ...] = Field(min_length=1)
    links: tuple[LinkSpec, ...] = ()
    cluster: ClusterLayout | None = None  # elect-cluster
    fattree: FattreeLayout | None = None  # elect-fattree
    ring: RingLayout | None = None  # sip-ring
    ocs: OcsLayout | None = None  # sip-ocs
    ina: InaLayout | None = None  # ina
    # TCP segments per packet a routed fabric's host queues take (core.shaping.segments_per_packet
    # of the run's smallest message); 0: the kernel's default
    segments_per_packet: int = Field(default=0, ge=0)
    # TCP's shortest retransmission timeout on the hosts' routes (ms of wall time): a switched
    # fabric's set-up gives the subnet route this (core.shaping.queued_rto_min_ms), a re-planning
    # fabric's controller renders its routes with it; 200: Linux's, left as it is
    rto_min_ms: int = Field(default=200, ge=1)

    def layout(self, kind: type[L]) -> L:
        """The kind's own layout, e.g. `topology.layout(RingLayout)` of a sip-ring topology."""
        for found in (self.cluster, self.fattree, self.ring, self.ocs, self.ina):
            if isinstance(found, kind):
                return found
        raise ContractError(f"a {self.fabric} topology has no {kind.__name__}")

    def switch_interfaces(self) -> list[str]:
        """Root-namespace interface names the fabric creates (what cleanup must remove)."""
        return [end for link in self.links for end in link.switch_ends()]


class Event(BaseModel):
    """One line of events.jsonl: what happened, on which host (-1: the fabric), when (seconds)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    kind: str
    t_s: float
    host: int


class Results(Contract):
    """results.json, the run's answer, every key of it (docs/run-directory.md); the last five appear
    only where the run has them."""

    name: str
    status: Literal["ok", "failed", "interrupted"]
    error: str | None
    iterations_completed: int = Field(ge=0)
    iterations_planned: int = Field(ge=0)
    iteration_times_s: list[float]
    iteration_tcp_retransmits: list[int]
    iteration_tcp_timeouts: list[int]
    iteration_stalls: list[int]
    iteration_steal_frac: list[float | None]
    predicted_iteration_time_s: float
    emulated_over_predicted: list[float]
    dilation: float
    byte_scale: float
    host_rate_bps: float
    breakdown: dict[str, float | None]
    reconfigurations: int = Field(ge=0)
    predicted_breakdown: dict[str, float]
    sums_correct: bool
    sum_problems: list[str]
    fidelity: dict[str, Any]
    notes: list[str]
    timings_s: dict[str, float]
    jobs: dict[str, dict[str, Any]] | None = None  # several jobs: each one's figures
    predicted_range_s: list[float] | None = None  # re-planning fabrics: fastest and slowest outcome predicted
    skipped_trace_nodes: dict[str, int] | None = None  # a Chakra trace's nodes that move no data, by type
    ina: dict[str, Any] | None = None  # an aggregation node's report
    faults: list[dict[str, Any]] | None = None  # the faults applied

    def dumps(self) -> str:  # `error` is null on success, and readers rely on the key
        absent = {key for key in ("jobs", "predicted_range_s", "skipped_trace_nodes", "ina", "faults")
                  if getattr(self, key) is None}
        return self.model_dump_json(indent=1, exclude=absent)

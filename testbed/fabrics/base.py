"""What every fabric kind's module provides, and the pieces they share: the topology builder (names,
addresses, shaped links) and the shape of a kind's behaviour."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from testbed.core.shaping import line_rate_bps
from testbed.fabrics.rendering import LinkRules
from testbed.fabrics.switched import forward_by_destination
from testbed.model.contracts import Topology
from testbed.model.errors import InputError
from testbed.model.fabric_section import FabricSection
from testbed.model.openflow import FlowRule
from testbed.model.topology import InterfaceSpec, KindLayout, LinkSpec, SwitchSpec
from testbed.network.flow_model import FlowModel, Traffic, relayed_forwarding_factor
from testbed.network.flows import Resource

S = TypeVar("S", bound=FabricSection)  # the kind's own section


def host_ip(rank: int) -> str:
    n = rank + 1
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


def host_mac(rank: int, interface: int = 0) -> str:
    n = rank + 1
    return "02:%02x:00:%02x:%02x:%02x" % (interface, (n >> 16) & 255, (n >> 8) & 255, n & 255)


def switch_name(tag: str, index: int) -> str:
    return f"tb{tag}s{index + 1}"


def switch_dpid(tag: str, index: int) -> int:
    return int(tag, 16) << 8 | (index + 1)


@dataclass
class PendingHost:
    """A host as a kind's `build` adds it: its interfaces and, where the kind sets one, its role;
    build_topology gives it its name, rank and address."""

    interfaces: list[InterfaceSpec]
    role: str | None = None


@dataclass
class TopologyBuilder:
    """The switches, hosts and links of one topology.json as a kind's `build` adds them."""

    tag: str
    host_rate_bps: float  # the dilated B: each GPU's emulated rate
    switches: list[SwitchSpec] = field(default_factory=list)
    hosts: list[PendingHost] = field(default_factory=list)
    links: list[LinkSpec] = field(default_factory=list)

    def add_switch(self, role: str, ports: int) -> SwitchSpec:
        index = len(self.switches)
        switch = SwitchSpec(name=switch_name(self.tag, index), dpid=switch_dpid(self.tag, index), ports=ports,
                            role=role)
        self.switches.append(switch)
        return switch

    def add_host(self, *interfaces: InterfaceSpec, role: str | None = None) -> PendingHost:
        host = PendingHost(list(interfaces), role)
        self.hosts.append(host)
        return host

    def host_link(self, rank: int, interface: int, switch: SwitchSpec, port: int,
                  rate_bps: float) -> InterfaceSpec:
        """A host interface on a switch port, shaped on the host side (and, on a switched fabric,
        where the switch port sends into the host: see emulation.fabric); returns the interface."""
        name = f"h{rank + 1}-eth{interface}"
        self.links.append(LinkSpec(host=f"h{rank + 1}", interface=name, switch=switch.name, port=port,
                                   payload_rate_bps=rate_bps, line_rate_bps=line_rate_bps(rate_bps),
                                   shaped_on="host"))
        return InterfaceSpec(name=name, mac=host_mac(rank, interface), switch=switch.name, port=port,
                             payload_rate_bps=rate_bps)

    def switch_link(self, switch: SwitchSpec, port: int, peer: SwitchSpec, peer_port: int,
                    rate_bps: float) -> None:
        """A link between two switches, shaped on the switch side (no host owns it)."""
        self.links.append(LinkSpec(switch=switch.name, port=port, peer_switch=peer.name, peer_port=peer_port,
                                   payload_rate_bps=rate_bps, line_rate_bps=line_rate_bps(rate_bps),
                                   shaped_on="switch"))

    def one_switch(self, role: str, ranks: int) -> SwitchSpec:
        """Every rank on one switch at the host rate (port = rank + 1)."""
        switch = self.add_switch(role, ranks)
        for rank in range(ranks):
            self.add_host(self.host_link(rank, 0, switch, rank + 1, self.host_rate_bps))
        return switch


def proportional_shares(total: int, sizes: list[int], hosts: int, what: str, field: str) -> list[int]:
    """job_sharing: partitioned: each job's part of the kind's `total` (switches, wavelengths),
    in proportion to its GPUs of `hosts`; every job needs one."""
    counts = [total * size // hosts for size in sizes]
    if min(counts) < 1:
        raise InputError(f"job_sharing: partitioned gives each job {what} in proportion to its GPUs, and a job of "
                         f"{min(sizes)} of {hosts} GPUs gets none of {total}; give the fabric more {field} or share "
                         f"them (job_sharing: shared)")
    return counts


def forwarded_once(fabric: FabricSection, traffic: Traffic) -> float:
    """A switched fabric forwards each packet once."""
    return 1.0


@dataclass(frozen=True)
class FabricBehaviour(Generic[S]):
    """A kind's part in every layer: the topology it emulates, the oracle's flow model of one MP
    group and of the DP all-reduce between groups, and the forwarding load it puts on the machine.

    build(fabric, builder) adds the kind's switches, hosts and links and returns its own sections of
    topology.json; flow_model(fabric, k, l, traffic, dp_bytes); dp_allreduce_s(fabric, k, l,
    grad_bytes, planned_rate_bps); forwarding_load_factor(fabric, traffic)."""

    build: Callable[[S, TopologyBuilder], dict[str, KindLayout]]
    flow_model: Callable[[S, int, int, Traffic, float], FlowModel]
    dp_allreduce_s: Callable[[S, int, int, float, float | None], float]
    forwarding_load_factor: Callable[[S, Traffic], float] = forwarded_once
    # How many GPUs a GPU can reach directly at once (its circuits or lightpaths; None: all), the
    # degree D the placer plans under.
    degree: Callable[[S], int | None] = lambda fabric: None
    default_reconfig_us: float = 0.0  # a reconfigurable kind's dark time when the scenario sets none
    # The estimation period, when the scenario sets none, as a multiple of the dark time (None: the
    # scenario's default period).
    period_per_reconfig: float | None = None
    # Whether the controller re-plans every estimation period during a run, and the flow model it
    # sets for a period's measured traffic, replan(fabric, k, l, traffic, recurring pairs to keep,
    # the model in force, the dark time a retune costs).
    replans: Callable[[S], bool] = lambda fabric: False
    replan: Callable[[S, int, int, Traffic, tuple[tuple[int, int], ...], FlowModel, float],
                     FlowModel] | None = None
    # The controller's rules for a switched kind's switches (forward by destination, or with ECMP)
    switch_rules: Callable[[Topology], dict[int, list[FlowRule]]] = forward_by_destination
    # A reconfigurable kind's rule plan (its link state, checked, planned and rendered); None: the
    # kind's links never change and switch_rules program it
    link_rules: LinkRules | None = None
    # job_sharing: partitioned: shares(fabric, each job's GPU count) -> per job the fabric it plans
    # on alone (its share of wavelengths or switches) and the first switch it owns; None: no shares
    shares: Callable[[S, list[int]], list[tuple[S, int]]] | None = None
    # dp_load(fabric, k, l, DP bytes a GPU sends): the bytes the DP ring puts, per iteration, on the
    # MP group's own resources (links the two share; empty where the DP ring has links of its own)
    dp_load: Callable[[S, int, int, float], dict[Resource, float]] = lambda fabric, k, l, dp_bytes: {}


def relayed(build: Callable[[S, TopologyBuilder], dict[str, KindLayout]],
            flow_model: Callable[[S, int, int, Traffic, float], FlowModel],
            dp_allreduce_s: Callable[[S, int, int, float, float | None], float],
            link_kind: str, degree: Callable[[S], int | None],
            **reconfiguration: Any) -> FabricBehaviour[S]:
    """The behaviour of a kind whose pairs without a direct `link_kind` link (circuit, lightpath)
    relay through GPUs: each hop crosses the fabric once, over the same (cached) plan the
    prediction uses."""
    def forwarding(fabric: S, traffic: Traffic) -> float:
        return relayed_forwarding_factor(fabric.hosts, traffic,
                                         lambda pairs: flow_model(fabric, fabric.hosts, 1, pairs, 0.0), link_kind)

    return FabricBehaviour(build, flow_model, dp_allreduce_s, forwarding, degree, **reconfiguration)

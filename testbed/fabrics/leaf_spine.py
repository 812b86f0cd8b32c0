"""Two-tier electrical fabrics (Elect-Cluster, Elect-Fattree): leaf switches of GPUs, each wired to
every spine by shaped uplinks, flows between leaves hashed over the spines. The topology, the flow
model, the DP rate and the forwarding load they share."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import networkx as nx

from testbed.fabrics.base import FabricBehaviour, S, TopologyBuilder
from testbed.fabrics.switched import forward_by_destination, switch_graph
from testbed.model.contracts import Topology
from testbed.model.fabric_section import FabricSection
from testbed.model.openflow import FlowRule
from testbed.model.topology import KindLayout
from testbed.model.units import gbps_to_bps, us_to_s
from testbed.network.flow_model import FlowModel, Traffic, nic_capacities, ring_allreduce_s
from testbed.network.flows import Resource


@dataclass(frozen=True)
class TwoTier:
    """GPUs per leaf, a leaf's uplink bandwidth in all as a multiple of B, and the spines."""

    per_leaf: int
    uplink_per_b: float
    spines: int


def ecmp_spine(src_rank: int, dst_rank: int, spines: int) -> int:
    """The spine a flow from `src_rank` to `dst_rank` crosses: a hash of the pair, as a switch hashes
    a flow's headers over equal-cost uplinks. The controller installs it and the oracle charges it,
    so both agree on which uplinks collide."""
    return zlib.crc32(f"{src_rank}>{dst_rank}".encode()) % spines


def build_two_tier(builder: TopologyBuilder, ranks: int, tiers: TwoTier, roles: tuple[str, str]) -> float:
    """Spine switches first, then a leaf per `per_leaf` ranks (hosts on ports 1.., then one uplink
    per spine), each uplink shaped to its share of the leaf's emulated uplink bandwidth. Returns
    that share (bits/s)."""
    spine_role, leaf_role = roles
    leaves = math.ceil(ranks / tiers.per_leaf)
    uplink_bps = builder.host_rate_bps * tiers.uplink_per_b / tiers.spines
    spines = [builder.add_switch(spine_role, leaves) for _ in range(tiers.spines)]
    for leaf in range(leaves):
        members = range(leaf * tiers.per_leaf, min(ranks, (leaf + 1) * tiers.per_leaf))
        switch = builder.add_switch(leaf_role, len(members) + tiers.spines)
        for local, rank in enumerate(members):
            builder.add_host(builder.host_link(rank, 0, switch, local + 1, builder.host_rate_bps))
        for index, spine in enumerate(spines):
            builder.switch_link(switch, len(members) + 1 + index, spine, leaf + 1, uplink_bps)
    return uplink_bps


def flow_model(k: int, B: float, tiers: TwoTier) -> FlowModel:
    """A pair on different leaves crosses its leaf's uplink to the spine its hash picks and that
    spine's downlink to the other leaf, each a spine's share of the leaf's uplink bandwidth."""
    per, spines = tiers.per_leaf, tiers.spines
    caps = nic_capacities(B, k)
    for leaf in range(math.ceil(k / per)):
        for spine in range(spines):
            caps[("up", leaf, spine)] = caps[("down", spine, leaf)] = B * tiers.uplink_per_b / spines

    def path(s: int, d: int) -> tuple[Resource, ...]:
        if s // per == d // per:
            return (("out", s), ("in", d))
        spine = ecmp_spine(s, d, spines)
        return (("out", s), ("up", s // per, spine), ("down", spine, d // per), ("in", d))

    return FlowModel(caps, default=path)


def dp_allreduce_s(fabric: FabricSection, tiers: TwoTier, k: int, l: int, grad_bytes: float) -> float:
    """Counterparts are k apart: up to min(k, per) of a leaf's GPUs leave it at once, sharing its
    uplinks (evenly over the spines, were the hash perfect)."""
    B = gbps_to_bps(fabric.gpu_bandwidth_gbps)
    rate = min(B, B * tiers.uplink_per_b / min(k, tiers.per_leaf)) if k * l > tiers.per_leaf else B
    return ring_allreduce_s(l, grad_bytes, rate, us_to_s(fabric.latency_us))


def dp_load(tiers: TwoTier, k: int, l: int, dp_bytes: float) -> dict[Resource, float]:
    """The DP ring's bytes on the uplinks an MP group's own flows cross. Only a group wider than a
    leaf crosses uplinks; then every GPU of a leaf sends its DP bytes to its counterpart k away, on
    another leaf, and receives as many, spread over the spines (were the hash perfect)."""
    if l <= 1 or k <= tiers.per_leaf or dp_bytes <= 0:
        return {}
    load: dict[Resource, float] = {}
    for leaf in range(math.ceil(k / tiers.per_leaf)):
        members = min(tiers.per_leaf, k - leaf * tiers.per_leaf)
        for spine in range(tiers.spines):
            load[("up", leaf, spine)] = load[("down", spine, leaf)] = members * dp_bytes / tiers.spines
    return load


# What a packet between leaves costs the emulating machine against one within a leaf: three
# switch passes (leaf, spine, leaf) and two shaped links between switches, each end of which is
# one of the datapath's own ports (counted as three passes, rings between leaves ran slow).
CROSSING_PASSES = 5


def forwarding_load_factor(tiers: TwoTier, traffic: Traffic) -> float:
    """Between leaves a packet costs CROSSING_PASSES times what it costs within one."""
    pairs = {p: v for p, v in traffic.items() if v > 0 and p[0] != p[1]}
    if not pairs:
        return 1.0
    per = tiers.per_leaf
    crossings = sum(v * (CROSSING_PASSES if s // per != d // per else 1) for (s, d), v in pairs.items())
    return crossings / sum(pairs.values())


PRIORITY_ECMP = 110  # a pair's uplink over its destination's default path


def ecmp_rules(topology: Topology, graph: nx.Graph) -> dict[int, list[FlowRule]]:
    """Per leaf, a rule for each local source and remote destination: out of the uplink to the
    spine `ecmp_spine` picks for the pair (the spines forward by destination alone)."""
    spines = [sw.name for sw in topology.switches if sw.role == "spine"]
    rules: dict[int, list[FlowRule]] = {}
    for leaf in (sw for sw in topology.switches if sw.role == "leaf"):
        local = [h for h in topology.hosts if h.switch == leaf.name]
        remote = [h for h in topology.hosts if h.switch != leaf.name]
        rules[leaf.dpid] = [
            FlowRule(PRIORITY_ECMP, (("eth_src", src.mac), ("eth_dst", dst.mac)),
                     graph.edges[leaf.name, spines[ecmp_spine(src.rank, dst.rank, len(spines))]]["ports"][leaf.name])
            for src in local for dst in remote]
    return rules


def forward_with_ecmp(topology: Topology) -> dict[int, list[FlowRule]]:
    """Forwarding by destination, and on each leaf a pair's uplink to its hashed spine (ECMP)."""
    rules = forward_by_destination(topology)
    for dpid, pair_rules in ecmp_rules(topology, switch_graph(topology)).items():
        rules[dpid].extend(pair_rules)
    return rules


def behaviour(tiers_of: Callable[[S], TwoTier], build: Callable[[S, TopologyBuilder], dict[str, KindLayout]],
              multipath: bool = False) -> FabricBehaviour[S]:
    """A two-tier kind's behaviour from how it reads its tiers off the scenario and its topology."""
    return FabricBehaviour(
        build=build,
        flow_model=lambda fabric, k, l, traffic, dp_bytes: flow_model(
            k, gbps_to_bps(fabric.gpu_bandwidth_gbps), tiers_of(fabric)),
        dp_allreduce_s=lambda fabric, k, l, grad_bytes, planned: dp_allreduce_s(
            fabric, tiers_of(fabric), k, l, grad_bytes),
        forwarding_load_factor=lambda fabric, traffic: forwarding_load_factor(tiers_of(fabric), traffic),
        dp_load=lambda fabric, k, l, dp_bytes: dp_load(tiers_of(fabric), k, l, dp_bytes),
        switch_rules=forward_with_ecmp if multipath else forward_by_destination,
    )

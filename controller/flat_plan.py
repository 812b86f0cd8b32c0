"""Pure flow planning for switched fabrics (Elect-Flat, Elect-Cluster, Elect-Fattree): forward by
destination along the shortest path of switches; on a leaf-spine, each pair of hosts on different
leaves leaves its leaf towards the spine its hash picks (ECMP)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx

from testbed.fabrics.all_kinds import KINDS
from testbed.fabrics.leaf_spine import ecmp_spine
from testbed.model.contracts import Topology

ETH_TYPE_ARP = 0x0806
PRIORITY_FORWARD = 100
PRIORITY_ECMP = 110  # a pair's uplink over its destination's default path


@dataclass(frozen=True)
class FlowRule:
    """One OpenFlow 1.3 rule: match fields (os-ken OFPMatch names) and an output port."""

    priority: int
    match: tuple[tuple[str, Any], ...]
    out_port: int
    table: int = 0

    def match_dict(self) -> dict[str, Any]:
        return dict(self.match)


def _switch_graph(topology: Topology) -> nx.Graph:
    graph = nx.Graph()
    graph.add_nodes_from(sw.name for sw in topology.switches)
    for link in topology.links:
        if link.peer_switch is not None:
            graph.add_edge(link.switch, link.peer_switch,
                           ports={link.switch: link.port, link.peer_switch: link.peer_port})
    return graph


def plan_flat_flows(topology: Topology) -> dict[int, list[FlowRule]]:
    """Rules per datapath id: unicast by MAC and ARP by target IP, each towards the host's switch.

    There is no table-miss rule, so anything else is dropped (switches are fail-secure): GPUs reach
    each other only through these rules, never by flooding.
    """
    graph = _switch_graph(topology)
    rules: dict[int, list[FlowRule]] = {sw.dpid: [] for sw in topology.switches}
    for sw in topology.switches:
        paths = nx.single_source_shortest_path(graph, sw.name)
        for host in topology.hosts:
            path = paths.get(host.switch)
            if path is None or host.port is None:
                continue
            port = host.port if len(path) == 1 else graph.edges[path[0], path[1]]["ports"][sw.name]
            rules[sw.dpid].append(FlowRule(PRIORITY_FORWARD, (("eth_dst", host.mac),), port))
            rules[sw.dpid].append(FlowRule(PRIORITY_FORWARD, (("eth_type", ETH_TYPE_ARP), ("arp_tpa", host.ip)), port))
    if KINDS[topology.fabric].multipath:
        for dpid, pair_rules in ecmp_rules(topology, graph).items():
            rules[dpid].extend(pair_rules)
    return rules


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

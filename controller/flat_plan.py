"""Pure flow planning for switched fabrics (Elect-Flat, Elect-Cluster): forward by destination along
the tree of switches, nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx

ETH_TYPE_ARP = 0x0806
PRIORITY_FORWARD = 100


@dataclass(frozen=True)
class FlowRule:
    """One OpenFlow 1.3 rule: match fields (os-ken OFPMatch names) and an output port."""

    priority: int
    match: tuple[tuple[str, Any], ...]
    out_port: int
    table: int = 0

    def match_dict(self) -> dict[str, Any]:
        return dict(self.match)


def _switch_graph(topology: dict[str, Any]) -> nx.Graph:
    graph = nx.Graph()
    graph.add_nodes_from(sw["name"] for sw in topology["switches"])
    for link in topology.get("links", []):
        if "peer_switch" in link:
            graph.add_edge(link["switch"], link["peer_switch"],
                           ports={link["switch"]: link["port"], link["peer_switch"]: link["peer_port"]})
    return graph


def plan_flat_flows(topology: dict[str, Any]) -> dict[int, list[FlowRule]]:
    """Rules per datapath id: unicast by MAC and ARP by target IP, each towards the host's switch.

    There is no table-miss rule, so anything else is dropped (switches are fail-secure): GPUs reach
    each other only through these rules, never by flooding.
    """
    graph = _switch_graph(topology)
    rules: dict[int, list[FlowRule]] = {int(sw["dpid"]): [] for sw in topology["switches"]}
    for sw in topology["switches"]:
        paths = nx.single_source_shortest_path(graph, sw["name"])
        for host in topology["hosts"]:
            path = paths.get(host["switch"])
            if path is None:
                continue
            port = int(host["port"]) if len(path) == 1 else graph.edges[path[0], path[1]]["ports"][sw["name"]]
            rules[int(sw["dpid"])].append(FlowRule(PRIORITY_FORWARD, (("eth_dst", host["mac"]),), port))
            rules[int(sw["dpid"])].append(
                FlowRule(PRIORITY_FORWARD, (("eth_type", ETH_TYPE_ARP), ("arp_tpa", host["ip"])), port))
    return rules

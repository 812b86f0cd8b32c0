"""The rule plan of switched fabrics (Elect-Flat, Elect-Cluster, Elect-Fattree, PS): forward by
destination along the shortest path of switches. Pure; a kind with several paths adds its own
rules over these (leaf_spine's ECMP)."""

from __future__ import annotations

import networkx as nx

from testbed.model.contracts import Topology
from testbed.model.openflow import FlowRule

ETH_TYPE_ARP = 0x0806
PRIORITY_FORWARD = 100


def switch_graph(topology: Topology) -> nx.Graph:
    graph = nx.Graph()
    graph.add_nodes_from(sw.name for sw in topology.switches)
    for link in topology.links:
        if link.peer_switch is not None:
            graph.add_edge(link.switch, link.peer_switch,
                           ports={link.switch: link.port, link.peer_switch: link.peer_port})
    return graph


def forward_by_destination(topology: Topology) -> dict[int, list[FlowRule]]:
    """Rules per datapath id: unicast by MAC and ARP by target IP, each towards the host's switch.

    There is no table-miss rule, so anything else is dropped (switches are fail-secure): GPUs reach
    each other only through these rules, never by flooding.
    """
    graph = switch_graph(topology)
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
    return rules

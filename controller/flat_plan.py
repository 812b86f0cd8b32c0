"""Pure flow planning for the Elect-Flat fabric: one switch, forward by destination, nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ETH_TYPE_ARP = 0x0806
PRIORITY_FORWARD = 100


@dataclass(frozen=True)
class FlowRule:
    """One OpenFlow 1.3 rule: match fields (os-ken OFPMatch names) and an output port."""

    priority: int
    match: tuple[tuple[str, Any], ...]
    out_port: int

    def match_dict(self) -> dict[str, Any]:
        return dict(self.match)


def plan_flat_flows(topology: dict[str, Any]) -> dict[int, list[FlowRule]]:
    """Rules per datapath id: unicast by MAC and ARP by target IP, each to the host's port.

    There is no table-miss rule, so anything else is dropped (switches are fail-secure): GPUs reach
    each other only through these rules, never by flooding.
    """
    rules: dict[int, list[FlowRule]] = {int(sw["dpid"]): [] for sw in topology["switches"]}
    dpid_of = {sw["name"]: int(sw["dpid"]) for sw in topology["switches"]}
    for host in topology["hosts"]:
        dpid = dpid_of[host["switch"]]
        port = int(host["port"])
        rules[dpid].append(FlowRule(PRIORITY_FORWARD, (("eth_dst", host["mac"]),), port))
        rules[dpid].append(
            FlowRule(PRIORITY_FORWARD, (("eth_type", ETH_TYPE_ARP), ("arp_tpa", host["ip"])), port)
        )
    return rules

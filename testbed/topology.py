"""The emulated fabric as data (topology.json): switches, hosts with their interfaces, and links with
emulated rates, for every fabric kind. Pure: the Mininet shim builds it, the controller programs it."""

from __future__ import annotations

import math
import zlib
from typing import Any

from testbed.scenario import Fabric
from testbed.shaping import line_rate_bps

DEFAULT_OCS_SWITCHES = 16


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


def ocs_switches(fabric: Fabric) -> int:
    return fabric.ocs_switches or DEFAULT_OCS_SWITCHES


def ecmp_spine(src_rank: int, dst_rank: int, spines: int) -> int:
    """The spine an elect-fattree flow from `src_rank` to `dst_rank` crosses: a hash of the pair, as
    a switch hashes a flow's headers over equal-cost uplinks. The controller installs it and the
    oracle charges it, so both agree on which uplinks collide."""
    return zlib.crc32(f"{src_rank}>{dst_rank}".encode()) % spines


def build_topology(fabric: Fabric, tag: str, host_rate_bps: float, datapath: str) -> dict[str, Any]:
    """Topology of `fabric` with each GPU's emulated rate `host_rate_bps` (the dilated B).

    elect-flat: one switch. elect-cluster: a switch per server, each with one uplink to a core
    switch. elect-fattree: leaf switches of `leaf_hosts` GPUs, each linked to every spine.
    sip-ocs: Q switches, each GPU has one interface of B/Q on each. sip-ring: one switch standing
    for the fibre ring, whose rules are the lightpaths; each GPU has one interface of B.
    """
    kind = fabric.kind
    # A ps fabric's CPU machines are hosts after the GPUs, on the same switch at the same rate.
    n = fabric.hosts + (fabric.cpu_servers if kind == "ps" else 0)
    switches: list[dict[str, Any]] = []
    hosts: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []

    def add_switch(role: str, ports: int) -> dict[str, Any]:
        index = len(switches)
        switch = {"name": switch_name(tag, index), "dpid": switch_dpid(tag, index), "ports": ports, "role": role}
        switches.append(switch)
        return switch

    def host_link(rank: int, interface: int, switch: dict[str, Any], port: int, rate_bps: float) -> dict[str, Any]:
        name = f"h{rank + 1}-eth{interface}"
        links.append({"host": f"h{rank + 1}", "interface": name, "switch": switch["name"], "port": port,
                      "payload_rate_bps": rate_bps, "line_rate_bps": line_rate_bps(rate_bps), "shaped_on": "host"})
        return {"name": name, "mac": host_mac(rank, interface), "switch": switch["name"], "port": port,
                "payload_rate_bps": rate_bps}

    extra: dict[str, Any] = {}
    if kind == "sip-ocs":
        q = ocs_switches(fabric)
        ocs = [add_switch("ocs", n) for _ in range(q)]
        per_circuit = host_rate_bps / q
        for rank in range(n):
            interfaces = [host_link(rank, i, ocs[i], rank + 1, per_circuit) for i in range(q)]
            hosts.append({"interfaces": interfaces})
        extra["ocs"] = {"switches": q, "circuit_rate_bps": per_circuit}
    elif kind == "elect-cluster":
        per = fabric.gpus_per_server
        servers = math.ceil(n / per)
        core = add_switch("core", servers)
        uplink_bps = host_rate_bps * fabric.server_uplink_gbps / fabric.gpu_bandwidth_gbps
        for server in range(servers):
            members = range(server * per, min(n, (server + 1) * per))
            switch = add_switch("server", len(members) + 1)
            for local, rank in enumerate(members):
                hosts.append({"interfaces": [host_link(rank, 0, switch, local + 1, host_rate_bps)]})
            links.append({"switch": switch["name"], "port": len(members) + 1, "peer_switch": core["name"],
                          "peer_port": server + 1, "payload_rate_bps": uplink_bps,
                          "line_rate_bps": line_rate_bps(uplink_bps), "shaped_on": "switch"})
        extra["cluster"] = {"gpus_per_server": per, "servers": servers, "uplink_rate_bps": uplink_bps}
    elif kind == "elect-fattree":
        per, leaves = fabric.leaf_hosts, n // fabric.leaf_hosts
        # Each leaf's GPUs share its uplinks: B·leaf_hosts/oversubscription, split over the spines.
        uplink_bps = host_rate_bps * per / fabric.oversubscription / fabric.spines
        spines = [add_switch("spine", leaves) for _ in range(fabric.spines)]
        for leaf in range(leaves):
            switch = add_switch("leaf", per + fabric.spines)
            for local in range(per):
                hosts.append({"interfaces": [host_link(leaf * per + local, 0, switch, local + 1, host_rate_bps)]})
            for index, spine in enumerate(spines):
                links.append({"switch": switch["name"], "port": per + 1 + index, "peer_switch": spine["name"],
                              "peer_port": leaf + 1, "payload_rate_bps": uplink_bps,
                              "line_rate_bps": line_rate_bps(uplink_bps), "shaped_on": "switch"})
        extra["fattree"] = {"leaf_hosts": per, "leaves": leaves, "spines": fabric.spines,
                            "oversubscription": fabric.oversubscription, "uplink_rate_bps": uplink_bps}
    elif kind == "ina":
        # No switch: the aggregation node owns one port per worker (a direct link, shaped at B on
        # both ends), sums INA packets in its pipeline and forwards all other traffic in its kernel.
        node: dict[str, Any] = {"name": f"h{n + 1}", "interfaces": []}
        for rank in range(n):
            name = f"h{rank + 1}-eth0"
            peer = f"h{n + 1}-eth{rank}"
            links.append({"host": f"h{rank + 1}", "interface": name, "peer_host": node["name"],
                          "peer_interface": peer, "payload_rate_bps": host_rate_bps,
                          "line_rate_bps": line_rate_bps(host_rate_bps), "shaped_on": "both"})
            hosts.append({"interfaces": [{"name": name, "mac": host_mac(rank), "peer": peer,
                                          "payload_rate_bps": host_rate_bps}]})
            node["interfaces"].append({"name": peer, "mac": host_mac(n, rank + 1), "peer": name,
                                       "payload_rate_bps": host_rate_bps})
        hosts.append(node)
        extra["ina"] = {"node": node["name"], "node_rank": n}
    else:  # elect-flat, sip-ring (one switch standing for the ring), and the others' single switch
        switch = add_switch("ring" if kind == "sip-ring" else "flat", n)
        for rank in range(n):
            hosts.append({"interfaces": [host_link(rank, 0, switch, rank + 1, host_rate_bps)]})
        if kind == "sip-ring":
            assert fabric.wavelengths is not None
            extra["ring"] = {"wavelengths": fabric.wavelengths,
                             "wavelength_rate_bps": host_rate_bps / fabric.wavelengths,
                             "reach": fabric.neighbors}
    for rank, host in enumerate(hosts):
        first = host["interfaces"][0]
        role = "gpu" if rank < fabric.hosts else ("aggregator" if kind == "ina" else "cpu")
        host.update({"name": f"h{rank + 1}", "rank": rank, "ip": host_ip(rank), "mac": first["mac"], "role": role})
        if "switch" in first:
            host.update({"switch": first["switch"], "port": first["port"]})
    return {"fabric": kind, "datapath": datapath, "host_rate_bps": host_rate_bps, "switches": switches,
            "hosts": hosts, "links": links, **extra}


def switch_interfaces(topology: dict[str, Any]) -> list[str]:
    """Root-namespace interface names the fabric creates (what cleanup must remove)."""
    names = [f"{link['switch']}-eth{link['port']}" for link in topology["links"] if "switch" in link]
    names += [f"{link['peer_switch']}-eth{link['peer_port']}" for link in topology["links"] if "peer_switch" in link]
    return names


DEFAULT_RECONFIG_US = {"sip-ocs": 10000.0, "sip-ring": 25.0}
# Multi-shot SiP-OCS re-plans at most this many reconfiguration times apart, so dark time stays a
# small share of the period unless the user sets estimate_period_us.
OCS_PERIOD_PER_RECONFIG = 10


def reconfig_us(fabric: Fabric) -> float:
    if fabric.reconfig_us is not None:
        return fabric.reconfig_us
    return DEFAULT_RECONFIG_US.get(fabric.kind, 0.0)


def estimate_period_us(fabric: Fabric) -> float:
    if fabric.kind == "sip-ocs" and "estimate_period_us" not in fabric.model_fields_set:
        return OCS_PERIOD_PER_RECONFIG * reconfig_us(fabric)
    return fabric.estimate_period_us

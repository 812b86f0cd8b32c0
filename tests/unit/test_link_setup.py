"""The commands a built topology's hosts and switch ports get: shaping on the right ends of the
right links, relaying only where GPUs route for each other. Pure, read without Mininet."""

from __future__ import annotations

from testbed.emulation.link_setup import host_commands, switch_port_shaping
from testbed.fabrics.topology import build_topology
from testbed.planning.scenario_file import make_fabric


def _shaped_devices(commands: list[str]) -> set[str]:
    return {line.split(" dev ")[1].split()[0] for line in commands if line.startswith("tc qdisc replace")}


def test_a_cluster_shapes_each_uplink_at_both_switch_ports_and_each_port_into_a_host():
    # 8 GPUs, 4 a server: 2 server switches (s2, s3 after the core s1), one uplink each to the core.
    fabric = make_fabric("t", kind="elect-cluster", hosts=8, gpus_per_server=4, gpu_bandwidth_gbps=100,
                         server_uplink_gbps=100)
    topology = build_topology(fabric, "ab12", 1e8, "user")
    shaped = _shaped_devices(switch_port_shaping(topology))
    uplink_ends = {end for link in topology.links if link.peer_switch is not None for end in link.switch_ends()}
    into_hosts = {f"{link.switch}-eth{link.port}" for link in topology.links if link.host is not None}
    assert len(uplink_ends) == 4 and len(into_hosts) == 8
    assert shaped == uplink_ends | into_hosts


def test_the_ps_fabric_shapes_only_the_host_side():
    fabric = make_fabric("t", kind="ps", hosts=4, cpu_servers=2, gpu_bandwidth_gbps=100)
    topology = build_topology(fabric, "ab12", 1e8, "user")
    assert switch_port_shaping(topology) == []
    commands = host_commands(topology)
    assert set(commands) == {f"h{i}" for i in range(1, 7)}
    assert all(_shaped_devices(lines) == {f"{name}-eth0"} for name, lines in commands.items())


def test_a_routed_fabric_relays_and_waits_for_the_controllers_routes():
    fabric = make_fabric("t", kind="sip-ocs", hosts=4, gpu_bandwidth_gbps=100, ocs_switches=2)
    topology = build_topology(fabric, "ab12", 1e8, "user")
    lines = host_commands(topology)["h2"]
    assert any("net.ipv4.ip_forward=1" in line for line in lines)
    assert lines[-1] == "ip route del 10.0.0.0/8 dev h2-eth0"
    assert "ip addr add 10.0.0.2/32 dev h2-eth1" in lines  # its second port answers to its address too
    assert _shaped_devices(lines) == {"h2-eth0", "h2-eth1"}
    flat = build_topology(make_fabric("t", kind="elect-flat", hosts=4, gpu_bandwidth_gbps=100), "ab12", 1e8, "user")
    assert not any("ip_forward" in line or "ip route" in line for line in host_commands(flat)["h2"])


def test_a_switched_fabrics_hosts_wait_out_their_own_queue_before_timing_out():
    fabric = make_fabric("t", kind="elect-flat", hosts=4, gpu_bandwidth_gbps=100)
    queued = build_topology(fabric, "ab12", 1e8, "user", rto_min_ms=1470)
    assert host_commands(queued)["h3"][-1] == \
        "ip route replace 10.0.0.0/8 dev h3-eth0 proto kernel scope link src 10.0.0.3 rto_min 1470ms"
    # At Linux's own 200 ms the subnet route is left as Mininet made it.
    plain = build_topology(fabric, "ab12", 1e8, "user")
    assert not any("ip route" in line for line in host_commands(plain)["h3"])

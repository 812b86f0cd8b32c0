"""Mininet shim for Elect-Flat: N hosts on one Open vSwitch bridge, shaped on the host side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import OVSSwitch, RemoteController

from testbed.errors import RunFailed
from testbed.registry import RunRecord, process_start_ticks
from testbed.shaping import htb_commands, line_rate_bps, offload_command


class UserspaceOVS(OVSSwitch):
    """OVS with the netdev datapath; a class (not a lambda) so Mininet's batch start-up is used."""

    def __init__(self, name, **params):
        params.update(datapath="user", failMode="secure", protocols="OpenFlow13")
        super().__init__(name, **params)


class KernelOVS(OVSSwitch):
    def __init__(self, name, **params):
        params.update(datapath="kernel", failMode="secure", protocols="OpenFlow13")
        super().__init__(name, **params)


def host_ip(rank: int) -> str:
    n = rank + 1
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


def host_mac(rank: int) -> str:
    n = rank + 1
    return "02:00:00:%02x:%02x:%02x" % ((n >> 16) & 255, (n >> 8) & 255, n & 255)


@dataclass
class ElectFlatFabric:
    """Builds and tears down the Mininet network; records what it creates in the run's record."""

    tag: str
    hosts: int
    host_rate_bps: float
    controller_port: int
    datapath: str
    record: RunRecord
    net: Mininet | None = None

    @property
    def switch_name(self) -> str:
        return f"tb{self.tag}s1"

    @property
    def dpid(self) -> int:
        return int(self.tag, 16) << 8 | 1

    def start(self) -> None:
        setLogLevel("error")
        switch_cls = KernelOVS if self.datapath == "kernel" else UserspaceOVS
        # Recorded before creation: a crash half-way still leaves a record naming them.
        self.record.bridges.append(self.switch_name)
        self.record.links.extend(f"{self.switch_name}-eth{i + 1}" for i in range(self.hosts))
        self.record.save()
        net = Mininet(topo=None, switch=switch_cls, controller=None, build=False, autoSetMacs=False,
                      autoStaticArp=False, waitConnected=False, ipBase="10.0.0.0/8")
        self.net = net
        net.addController(RemoteController("c0", ip="127.0.0.1", port=self.controller_port))
        switch = net.addSwitch(self.switch_name, dpid="%016x" % self.dpid)
        for rank in range(self.hosts):
            host = net.addHost(f"h{rank + 1}", ip=f"{host_ip(rank)}/8", mac=host_mac(rank))
            net.addLink(host, switch, port2=rank + 1)
        net.build()
        for host in net.hosts:
            self.record.processes.append((host.pid, process_start_ticks(host.pid)))
        self.record.save()
        net.start()
        net.staticArp()
        for rank, host in enumerate(net.hosts):
            intf = host.defaultIntf().name
            commands = [offload_command(intf)] + htb_commands(intf, self.host_rate_bps)
            for command in commands:
                out = host.cmd(command + " ; echo rc=$?").strip()
                if not out.endswith("rc=0"):
                    raise RunFailed(f"configuring {host.name} failed: `{command}` said {out}")
        for intf in switch.intfList():
            if intf.name != "lo":
                switch.cmd(offload_command(intf.name) + " >/dev/null 2>&1")

    def topology(self) -> dict[str, Any]:
        """The fabric as the controller and the run directory see it; known before `start`."""
        return {
            "fabric": "elect-flat",
            "datapath": self.datapath,
            "host_rate_bps": self.host_rate_bps,
            "switches": [{"name": self.switch_name, "dpid": self.dpid, "ports": self.hosts}],
            "hosts": [
                {"name": f"h{rank + 1}", "rank": rank, "ip": host_ip(rank), "mac": host_mac(rank),
                 "switch": self.switch_name, "port": rank + 1}
                for rank in range(self.hosts)
            ],
            "links": [
                {"host": f"h{rank + 1}", "switch": self.switch_name, "port": rank + 1,
                 "payload_rate_bps": self.host_rate_bps, "line_rate_bps": line_rate_bps(self.host_rate_bps),
                 "shaped_on": "host"}
                for rank in range(self.hosts)
            ],
        }

    def host(self, rank: int):
        assert self.net is not None
        return self.net.hosts[rank]

    def interact(self) -> None:
        """Mininet's command line on the live fabric (for `testbed run --cli`); returns on exit."""
        from mininet.cli import CLI

        assert self.net is not None
        setLogLevel("output")  # the CLI prints command output at this level
        try:
            CLI(self.net)
        finally:
            setLogLevel("error")

    def stop(self) -> None:
        if self.net is not None:
            net, self.net = self.net, None
            net.stop()

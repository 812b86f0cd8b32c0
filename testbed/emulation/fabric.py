"""Mininet shim: builds any fabric of testbed.fabrics.topology (switches, hosts with one or more shaped
interfaces, switch-to-switch links), records what it creates, and tears it down."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Any

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import OVSSwitch, RemoteController

from testbed.core.shaping import offload_command
from testbed.emulation.link_setup import host_commands, switch_port_shaping
from testbed.emulation.registry import RunRecord, process_start_ticks
from testbed.fabrics.all_kinds import KINDS
from testbed.fabrics.ina.node_links import ina_host_commands
from testbed.model.contracts import Topology
from testbed.model.errors import RunFailed


class _CheckedOVS(OVSSwitch):
    """ovs-vsctl run directly, not through the switch's shell: that shell reads through a terminal
    whose lines stop at 4,095 bytes, and the one command that creates a bridge with its ports
    passes that length at about 50 ports (it was cut, failed, and left no bridge at 64 GPUs)."""

    def vsctl(self, *args: Any, **kwargs: Any) -> str:
        if self.batch:
            return super().vsctl(*args, **kwargs)
        command = "ovs-vsctl " + " ".join(str(arg).strip() for arg in args)
        done = subprocess.run(command, shell=True, capture_output=True, text=True)
        if done.returncode != 0:
            raise RunFailed(f"creating switch {self.name} failed: ovs-vsctl said "
                            f"{(done.stderr or done.stdout).strip() or 'nothing'} (exit status {done.returncode})")
        return done.stdout


class UserspaceOVS(_CheckedOVS):
    """OVS with the netdev datapath; a class (not a lambda) so Mininet's batch start-up is used."""

    def __init__(self, name, **params):
        params.update(datapath="user", failMode="secure", protocols="OpenFlow13")
        super().__init__(name, **params)


class KernelOVS(_CheckedOVS):
    def __init__(self, name, **params):
        params.update(datapath="kernel", failMode="secure", protocols="OpenFlow13")
        super().__init__(name, **params)


def run_checked(node: Any, command: str, doing: str) -> None:
    """Run a shell command in a Mininet node; RunFailed naming it and what it said if it fails."""
    run_all_checked(node, [command], doing)


MARK = "@@testbed-rc@@"  # separates each command's output from its exit status
# A Mininet node's shell reads through a terminal, whose lines stop at 4,095 bytes.
MAX_LINE_BYTES = 3000


def run_all_checked(node: Any, commands: list[str], doing: str) -> None:
    """Run shell commands in a Mininet node in as few round trips as its terminal allows (each
    costs milliseconds per host); RunFailed naming the first that failed and what it said."""
    pieces = [f"{command} 2>&1; echo {MARK}$?" for command in commands]
    start, length = 0, 0
    for end, piece in enumerate(pieces):
        if end > start and length + 2 + len(piece) > MAX_LINE_BYTES:
            _run_batch(node, commands[start:end], pieces[start:end], doing)
            start, length = end, 0
        length += len(piece) + (2 if end > start else 0)
    if start < len(pieces):
        _run_batch(node, commands[start:], pieces[start:], doing)


def _run_batch(node: Any, commands: list[str], pieces: list[str], doing: str) -> None:
    out = node.cmd("; ".join(pieces)).split(MARK)  # [output 0, "status 0\noutput 1", ..., "status n-1\n"]
    for index, command in enumerate(commands):
        said = out[index].strip() if index < len(out) else ""
        status, _, rest = out[index + 1].partition("\n") if index + 1 < len(out) else ("missing", "", "")
        if status.strip() != "0":
            raise RunFailed(f"{doing} failed: `{command}` said {said or 'nothing'} (exit status {status.strip()})")
        out[index + 1] = rest  # the next command's output follows this one's status line


class VerifiedController(RemoteController):
    """The runner's os-ken controller, already verified listening on its port. Mininet's own check
    telnets to the port and decodes what comes back as text: os-ken answers with an OpenFlow HELLO
    whose random transaction id is not always UTF-8, and the check then fails the run."""

    def checkListening(self) -> None:  # noqa: N802 (Mininet's name)
        return None


@dataclass
class MininetFabric:
    """Builds the network of a topology; records what it creates in the run's record."""

    topology: Topology
    controller_port: int
    record: RunRecord
    link_loss_frac: float = 0.0  # ina: INA packets dropped on every link (loss injection)
    net: Mininet | None = None

    @property
    def switch_names(self) -> list[str]:
        return [switch.name for switch in self.topology.switches]

    def start(self) -> None:
        setLogLevel("error")
        topo = self.topology
        switch_cls = KernelOVS if topo.datapath == "kernel" else UserspaceOVS
        # Recorded before creation: a crash half-way still leaves a record naming them.
        self.record.bridges.extend(self.switch_names)
        self.record.links.extend(topo.switch_interfaces())
        self.record.save()
        net = Mininet(topo=None, switch=switch_cls, controller=None, build=False, autoSetMacs=False,
                      autoStaticArp=False, waitConnected=False, ipBase="10.0.0.0/8")
        self.net = net
        switches = self._add_nodes_and_links(net)
        net.build()
        for node in net.hosts:
            self.record.processes.append((node.pid, process_start_ticks(node.pid)))
        self.record.save()
        net.start()
        if KINDS[topo.fabric].aggregation_node:
            self._configure_ina()
            return
        if not KINDS[topo.fabric].routed:
            net.staticArp()
        for name, commands in host_commands(topo).items():
            run_all_checked(net.get(name), commands, f"configuring {name}")
        shaping = switch_port_shaping(topo)
        # Switch ports whose offloads cannot change are left as they are (hence `|| true`).
        shaping += [offload_command(intf.name) + " >/dev/null 2>&1 || true"
                    for switch in switches.values() for intf in switch.intfList() if intf.name != "lo"]
        self._root_cmd(shaping)

    def _add_nodes_and_links(self, net: Mininet) -> dict[str, Any]:
        """The topology's switches (with the controller), hosts and links, not yet built."""
        topo = self.topology
        if topo.switches:
            net.addController(VerifiedController("c0", ip="127.0.0.1", port=self.controller_port))
        switches = {sw.name: net.addSwitch(sw.name, dpid="%016x" % sw.dpid) for sw in topo.switches}
        nodes = {}
        for host in topo.hosts:
            node = nodes[host.name] = net.addHost(host.name, ip=f"{host.ip}/8", mac=host.mac)
            for intf in host.interfaces:
                if intf.switch is not None:
                    net.addLink(node, switches[intf.switch], port2=intf.port, intfName1=intf.name,
                                addr1=intf.mac)
        macs = {intf.name: intf.mac for host in topo.hosts for intf in host.interfaces}
        for link in topo.links:
            if link.switch is not None and link.peer_switch is not None:
                net.addLink(switches[link.switch], switches[link.peer_switch], port1=link.port,
                            port2=link.peer_port)
            elif (link.host is not None and link.peer_host is not None  # a direct host-to-host link (INA's node)
                  and link.interface is not None and link.peer_interface is not None):
                net.addLink(nodes[link.host], nodes[link.peer_host], intfName1=link.interface,
                            intfName2=link.peer_interface, addr1=macs[link.interface],
                            addr2=macs[link.peer_interface])
        return switches

    def _configure_ina(self) -> None:
        assert self.net is not None
        for name, commands in ina_host_commands(self.topology, self.link_loss_frac).items():
            node = self.net.get(name)
            run_all_checked(node, commands, f"configuring {name}")

    def root_node(self):
        """A node whose commands run in the root namespace (where the switches' ports are)."""
        assert self.net is not None
        return self.net.switches[0]  # switches run in the root namespace

    def _root_cmd(self, commands: list[str]) -> None:
        run_all_checked(self.root_node(), commands, "configuring the fabric")

    def host(self, rank: int):
        assert self.net is not None
        return self.net.hosts[rank]

    def host_pids(self) -> list[int]:
        assert self.net is not None
        return [node.pid for node in self.net.hosts]

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

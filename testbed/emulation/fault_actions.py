"""What each fault does to a live run (the shim beside testbed.core.faults): loss or a dead link as
netem on both ends of a GPU's link where the kernel has it, else as iptables rules in the GPU's
host (both directions, loopback untouched), SIGKILL of an agent, a
controller killed and restarted on its own port, an aggregation node killed and restarted."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

from testbed.core.faults import FaultStep, leaf_classes, leaf_queues, netem_commands
from testbed.emulation.fabric import run_checked
from testbed.model.errors import RunFailed
from testbed.model.topology import InterfaceSpec

if TYPE_CHECKING:
    from testbed.emulation.live import LiveFabric
    from testbed.emulation.side_processes import SideProcesses


def link_rules(step: FaultStep) -> list[str]:
    """iptables commands (inside the GPU's host) that start or end the fault."""
    fault = step.fault
    match = "" if fault.kind == "link_down" else f"-m statistic --mode random --probability {fault.loss_frac:.6f} "
    verb = "-D" if step.undo else "-I"
    return [f"iptables {verb} INPUT ! -i lo {match}-j DROP", f"iptables {verb} OUTPUT ! -o lo {match}-j DROP"]


class FaultActions:
    def __init__(self, live: "LiveFabric", agents: list[subprocess.Popen], sides: "SideProcesses",
                 netem: bool) -> None:
        self.live, self.agents, self.sides, self.netem = live, agents, sides, netem
        self._queues: dict[str, dict[str, str]] = {}  # by interface: its leaves' queues before a fault

    def _far_end(self, intf: InterfaceSpec) -> tuple[Any, str]:
        """(node, interface) at the other end of a GPU's interface: a switch port in the root
        namespace (shaped into the host on switched fabrics), or another host's (the ina node's)."""
        fabric = self.live.fabric
        if intf.switch is not None:
            return fabric.root_node(), f"{intf.switch}-eth{intf.port}"  # Mininet's port name
        for rank, host in enumerate(fabric.topology.hosts):
            for other in host.interfaces:
                if other.name == intf.peer:
                    return fabric.host(rank), other.name
        raise RunFailed(f"interface {intf.name} has no other end in the topology")

    def apply(self, step: FaultStep) -> str | None:
        """Does what `step` says; for a link fault, says how ('netem' or 'iptables')."""
        fault = step.fault
        rank = fault.host if fault.host is not None else -1  # link and agent faults name one (validated)
        if fault.kind in ("link_loss", "link_down"):
            host = self.live.fabric.host(rank)
            doing = f"injecting {fault.kind} on GPU {rank}"
            if not self.netem:
                for command in link_rules(step):
                    run_checked(host, command, doing)
                return "iptables"
            for intf in self.live.fabric.topology.hosts[rank].interfaces:
                for node, interface in ((host, intf.name), self._far_end(intf)):
                    # An interface without shaping classes takes netem as its root qdisc.
                    leaves = leaf_classes(node.cmd(f"tc class show dev {interface}")) or None
                    if not step.undo:
                        self._queues[interface] = leaf_queues(node.cmd(f"tc qdisc show dev {interface}"))
                    for command in netem_commands(step, interface, leaves, self._queues.get(interface)):
                        run_checked(node, command, doing)
            return "netem"
        elif fault.kind == "agent_kill":
            self.agents[rank].kill()
        elif fault.kind == "controller_restart":
            controller = self.live.controller
            controller.restart()
            self.live.record.add_process(controller.pid)
        elif fault.kind == "node_restart":
            self.sides.restart_ina_node()
        return None

"""What the fidelity monitors read of Open vSwitch during a run: packets its ports received and
dropped (OpenFlow port stats, and the drops at the packet sockets the userspace datapath reads its
ports through)."""

from __future__ import annotations

import re
import subprocess

from testbed.emulation.records import SwitchPackets

# `ss -0 -m` lists packet sockets with the interface each is bound to and its drop count (the d in
# skmem): the userspace datapath's drops when it reads a port more slowly than packets arrive,
# which no port counter, qdisc or datapath statistic shows.
_PACKET_SOCKET = re.compile(r"^p_raw\s+\S+\s+\S+\s+\S*:(\S+)\s.*?skmem:\(.*?\bd(\d+)\)", re.MULTILINE)


def packet_socket_drops(ss_output: str, interfaces: set[str]) -> int:
    """Packets dropped at the packet sockets bound to `interfaces`, from `ss -0 -m` output."""
    one_line_each = re.sub(r"\n\s+", " ", ss_output)  # ss may put a socket's skmem on a line of its own
    return sum(int(drops) for name, drops in _PACKET_SOCKET.findall(one_line_each) if name in interfaces)


def _command_output(args: list[str]) -> str | None:
    try:
        out = subprocess.run(args, capture_output=True, text=True, check=False, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def switch_port_counters(bridges: list[str]) -> tuple[int, int] | None:
    """(packets received, packets dropped) over the bridges' ports: OpenFlow port stats (rx + tx
    drops) and the drops at the packet sockets the userspace datapath reads its ports through."""
    received = dropped = 0
    ports: set[str] = set()
    for bridge in bridges:
        stats = _command_output(["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", bridge])
        if stats is None:
            return None
        received += sum(int(n) for n in re.findall(r"rx pkts=(\d+)", stats))
        dropped += sum(int(n) for n in re.findall(r"drop=(\d+)", stats))
        ports.update((_command_output(["ovs-vsctl", "--timeout=5", "list-ports", bridge]) or "").split())
    sockets = _command_output(["ss", "-0", "-m"])
    if sockets is not None:
        dropped += packet_socket_drops(sockets, ports)
    return received, dropped


def counter_delta(before: tuple[int, int] | None, after: tuple[int, int] | None) -> SwitchPackets | None:
    if before is None or after is None:
        return None
    return SwitchPackets(packets=after[0] - before[0], dropped=after[1] - before[1])

"""Commands that turn an `ina` topology's hosts into a star around the aggregation node: the
node's kernel forwards ordinary traffic between its ports (a packet switch), its program sums INA
packets; every port is shaped at B on both ends; optional loss on every link for INA packets
(iptables' statistic match). Pure: the Mininet shim runs them."""

from __future__ import annotations

from typing import Any

from hosts.ina.protocol import DATA_PORT
from testbed.shaping import htb_commands_small_first, offload_command

NODE_SYSCTLS = ("net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
                "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.default.send_redirects=0")


def _loss_rule(chain: str, loss_frac: float) -> str:
    return (f"iptables -A {chain} -p udp --dport {DATA_PORT} -m statistic --mode random "
            f"--probability {loss_frac:.6f} -j DROP")


def ina_host_commands(topology: dict[str, Any], link_loss_frac: float = 0.0) -> dict[str, list[str]]:
    """Per host name, the commands to run inside it (after Mininet has created the links)."""
    hosts = topology["hosts"]
    node = next(h for h in hosts if h["role"] == "aggregator")
    workers = [h for h in hosts if h["role"] != "aggregator"]
    commands: dict[str, list[str]] = {}
    for worker, port in zip(workers, node["interfaces"]):
        intf = worker["interfaces"][0]["name"]
        cmds = ["sysctl -qw net.ipv4.tcp_slow_start_after_idle=0", offload_command(intf)]
        cmds += htb_commands_small_first(intf, worker["interfaces"][0]["payload_rate_bps"])
        # Everything a worker sends goes to the node's port facing it (the node routes it on).
        cmds += [f"ip neigh replace {other['ip']} lladdr {port['mac']} dev {intf} nud permanent"
                 for other in hosts if other is not worker]
        if link_loss_frac > 0:
            cmds.append(_loss_rule("OUTPUT", link_loss_frac))
        commands[worker["name"]] = cmds
    first = node["interfaces"][0]["name"]
    cmds = ["sysctl -qw " + " ".join(NODE_SYSCTLS), f"ip route del 10.0.0.0/8 dev {first}"]
    for worker, port in zip(workers, node["interfaces"]):
        intf = port["name"]
        cmds += [offload_command(intf), f"sysctl -qw net.ipv4.conf.{intf}.rp_filter=0"]
        cmds += htb_commands_small_first(intf, port["payload_rate_bps"])
        if intf != first:
            cmds.append(f"ip addr add {node['ip']}/32 dev {intf}")
        cmds += [f"ip route replace {worker['ip']}/32 dev {intf}",
                 f"ip neigh replace {worker['ip']} lladdr {worker['interfaces'][0]['mac']} dev {intf} nud permanent"]
    if link_loss_frac > 0:  # results and forwarded fallback pieces on their way to the workers
        cmds += [_loss_rule("OUTPUT", link_loss_frac), _loss_rule("FORWARD", link_loss_frac)]
    commands[node["name"]] = cmds
    return commands


DEFAULT_POOL_SLOTS = 512
MAX_WINDOW = 64  # outstanding chunks per worker and job: far above the emulated bandwidth-delay product
# Packets per second one node program receives and answers while the workers share the 2 cores
# (bench/ina.py measures it); `auto` keeps the workers' total under NODE_LOAD_FRACTION of it.
NODE_PACKETS_PER_S = 20_000
NODE_LOAD_FRACTION = 0.6


def max_worker_rate_bps(workers: int) -> float:
    """The emulated per-worker rate the node program keeps up with when all workers send at once."""
    from hosts.ina.protocol import FRAME_BYTES

    return NODE_LOAD_FRACTION * NODE_PACKETS_PER_S * FRAME_BYTES * 8 / workers


def ina_settings(fabric, workers_per_job: int, host_rate_bps: float, aggregation_bps: float | None,
                 seed: int, run_dir: str) -> tuple[dict, dict]:
    """(node config, the agents' `ina` config) for an ina fabric at the emulated host rate."""
    from hosts.ina.client import default_rto_s

    jobs = fabric.hosts // workers_per_job
    pool = fabric.slots or DEFAULT_POOL_SLOTS
    window = min(MAX_WINDOW, pool // jobs)
    if window < 1:
        from testbed.errors import InputError

        raise InputError(f"fabric.slots ({pool}) gives {jobs} jobs no slot each; raise slots to at least {jobs}")
    node = {"pool_slots": pool, "sharing": fabric.sharing, "drop_frac": fabric.node_drop_frac, "seed": seed,
            "aggregation_bps": aggregation_bps, "ready": f"{run_dir}/ina_node.ready",
            "counters": f"{run_dir}/ina_node.json"}
    agents = {"window": window, "rto_s": default_rto_s(window, fabric.hosts, host_rate_bps, NODE_PACKETS_PER_S)}
    return node, agents

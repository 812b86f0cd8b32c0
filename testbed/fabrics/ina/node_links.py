"""Commands that turn an `ina` topology's hosts into a star around the aggregation node: the
node's kernel forwards ordinary traffic between its ports (a packet switch), its program sums INA
packets; every port is shaped at B on both ends; optional loss on every link for INA packets
(iptables' statistic match). Pure: the Mininet shim runs them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from testbed.core.shaping import (
    MTU_FRAME_BYTES,
    TCP_PAYLOAD_BYTES,
    htb_commands_small_first,
    line_rate_bps,
    offload_command,
    transport_command,
)
from testbed.fabrics.ina.loss import InaProtocol, lossy_allreduce_s
from testbed.fabrics.ina.section import InaFabric
from testbed.fabrics.ina.shared_slots import SharedPool, shared_allreduce_s
from testbed.model.contracts import Topology
from testbed.model.errors import InputError
from testbed.model.schedule import CollectiveStep, Schedule
from testbed.model.units import bytes_to_bits, transfer_time_s
from testbed.network.collectives import ina_packets, ina_window_slowdown
from testbed.shared.ina_rules import (
    DATA_PORT,
    FALLBACK_PORT,
    FRAME_BYTES,
    MIN_RTO_S,
    PAYLOAD_BYTES,
    default_rto_s,
    min_rto_s,
)

NODE_SYSCTLS = ("net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
                "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.default.send_redirects=0")

# An INA pass of C chunks fills and drains its window once (about one window's round trip its
# closed form leaves out) and meets shared slots' collisions C·f times: 1,000 chunks keep both
# within a few percent (a run of 61 chunks a pass measured 0.97-1.26 of its prediction).
INA_MIN_CHUNKS = 1000


def _loss_rule(chain: str, loss_frac: float, port: int = DATA_PORT) -> str:
    # Dropped where a packet arrives: a drop in OUTPUT would fail the sender's call instead.
    return (f"iptables -A {chain} -p udp --dport {port} -m statistic --mode random "
            f"--probability {loss_frac:.6f} -j DROP")


def ina_host_commands(topology: Topology, link_loss_frac: float = 0.0) -> dict[str, list[str]]:
    """Per host name, the commands to run inside it (after Mininet has created the links)."""
    hosts = topology.hosts
    node = next(h for h in hosts if h.role == "aggregator")
    workers = [h for h in hosts if h.role != "aggregator"]
    commands: dict[str, list[str]] = {}
    for worker, port in zip(workers, node.interfaces):
        intf = worker.interfaces[0].name
        cmds = [transport_command(), offload_command(intf)]
        cmds += htb_commands_small_first(intf, worker.interfaces[0].payload_rate_bps, burst=MTU_FRAME_BYTES)
        # Everything a worker sends goes to the node's port facing it (the node routes it on).
        cmds += [f"ip neigh replace {other.ip} lladdr {port.mac} dev {intf} nud permanent"
                 for other in hosts if other is not worker]
        if link_loss_frac > 0:  # results (and fallback pieces) arriving over the link
            cmds += [_loss_rule("INPUT", link_loss_frac), _loss_rule("INPUT", link_loss_frac, FALLBACK_PORT)]
        commands[worker.name] = cmds
    first = node.interfaces[0].name
    cmds = ["sysctl -qw " + " ".join(NODE_SYSCTLS), f"ip route del 10.0.0.0/8 dev {first}"]
    for worker, port in zip(workers, node.interfaces):
        intf = port.name
        cmds += [offload_command(intf), f"sysctl -qw net.ipv4.conf.{intf}.rp_filter=0"]
        cmds += htb_commands_small_first(intf, port.payload_rate_bps, burst=MTU_FRAME_BYTES)
        if intf != first:
            cmds.append(f"ip addr add {node.ip}/32 dev {intf}")
        cmds += [f"ip route replace {worker.ip}/32 dev {intf}",
                 f"ip neigh replace {worker.ip} lladdr {worker.interfaces[0].mac} dev {intf} nud permanent"]
    if link_loss_frac > 0:  # workers' packets arriving at the node, and fallback traffic it forwards
        cmds += [_loss_rule("INPUT", link_loss_frac), _loss_rule("FORWARD", link_loss_frac),
                 _loss_rule("FORWARD", link_loss_frac, FALLBACK_PORT)]
    commands[node.name] = cmds
    return commands


DEFAULT_POOL_SLOTS = 512
SHARED_POOL_PER_WINDOW = 8
SHARED_SIMULATED_CHUNKS = 10_000
MAX_WINDOW = 16  # outstanding chunks per worker and job: several times the emulated bandwidth-delay product
# The node program sustains a share of the packet rate `doctor --calibrate` measures with full
# windows from 4 workers: bench/ina.py's runs kept at least 0.92 of their rate up to 23-24k
# packets/s on a machine where that probe measured 42.7-47.6k. `auto` keeps the workers' total under
# NODE_LOAD_FRACTION of the sustained rate: the node's and workers' time per packet is part of every
# chunk's round trip, which a line-rate node does not have. At 0.6 of it, ina-allreduce measured
# 1.05-1.06 of its prediction and ina-two-jobs 1.03-1.10; at half that rate (twice the dilation),
# 1.03-1.045 and 1.04-1.05.
NODE_SUSTAINED_FRACTION = 0.45
NODE_LOAD_FRACTION = 0.3


def sustained_packets_per_s(measured_packets_per_s: float) -> float:
    """Packets/s the node keeps answering in a run, from the calibration's measured rate."""
    return NODE_SUSTAINED_FRACTION * measured_packets_per_s


def max_worker_rate_bps(workers: int, measured_packets_per_s: float) -> float:
    """The emulated per-worker rate the node program keeps up with when all workers send at once."""
    return (NODE_LOAD_FRACTION * sustained_packets_per_s(measured_packets_per_s) * bytes_to_bits(FRAME_BYTES)
            / workers)


# A window too small to keep a link busy (fabric.slots) puts the node program's 2n packets of each
# chunk on every chunk's round trip, where a real node's pipeline takes nanoseconds: the workers'
# rate is then held so that the node's share of the round trip stays this small.
NODE_SERIAL_SHARE = 0.05


def worker_rate_cap_bps(fabric: InaFabric, workers_per_job: int, measured_packets_per_s: float) -> float:
    """The emulated per-worker rate the node program keeps up with: with full windows, the rate
    max_worker_rate_bps allows; with a window that idles the link, also the rate at which a chunk's
    2n packets through the node take NODE_SERIAL_SHARE of its two frame times."""
    cap = max_worker_rate_bps(fabric.hosts, measured_packets_per_s)
    if window_slowdown(fabric, workers_per_job) > 1:
        node_s = 2 * workers_per_job / sustained_packets_per_s(measured_packets_per_s)
        cap = min(cap, NODE_SERIAL_SHARE * 2 * bytes_to_bits(FRAME_BYTES) / node_s)
    return cap


def ina_workers_per_job(schedule: Schedule, fabric: InaFabric) -> int:
    """Workers of each INA job: the groups of the schedule's INA all-reduces (a collective's, or a
    large model's data-parallel groups, all of one size), else the fabric's own jobs."""
    sizes = {len(step.group) for gpu in schedule.gpus for step in gpu.steps
             if isinstance(step, CollectiveStep) and step.algorithm == "ina"}
    if len(sizes) > 1:
        raise InputError(f"INA jobs of {sorted(sizes)} workers in one schedule; the node's slots are cut for "
                         f"jobs of one size")
    return sizes.pop() if sizes else fabric.workers_per_job or fabric.hosts


def ina_window(fabric: InaFabric, workers_per_job: int) -> tuple[int, int]:
    """(the node's pool of slots, each job's window of outstanding chunks)."""
    jobs = fabric.hosts // workers_per_job
    pool = fabric.slots or DEFAULT_POOL_SLOTS
    # Shared slots: the jobs' chunks in flight should fill a small part of the pool, or most
    # chunks collide; reserved slots: each job's window is its own range.
    per_job = pool // jobs if fabric.sharing == "reserved" else pool // (SHARED_POOL_PER_WINDOW * jobs)
    window = min(MAX_WINDOW, per_job)
    if window < 1:
        need = jobs if fabric.sharing == "reserved" else SHARED_POOL_PER_WINDOW * jobs
        raise InputError(f"fabric.slots ({pool}) leaves {jobs} job(s) no slot each with {fabric.sharing} sharing; "
                         f"raise slots to at least {need}")
    return pool, window


def window_slowdown(fabric: InaFabric, workers_per_job: int) -> float:
    """How many times longer each worker's INA stream keeps its link with the window the node's
    slots leave it (1 where the window keeps the link busy)."""
    return ina_window_slowdown(ina_window(fabric, workers_per_job)[1])


def frame_s(rate_bps: float) -> float:
    """One INA frame on a link shaped to carry `rate_bps` of TCP payload (it carries frames at the
    line rate that gives)."""
    return bytes_to_bits(FRAME_BYTES) * TCP_PAYLOAD_BYTES / (MTU_FRAME_BYTES * rate_bps)


def shared_slots(fabric: InaFabric, workers_per_job: int, size_bytes: float, rate_bps: float,
                 latency_s: float) -> tuple[float, float]:
    """(time, share of chunks summed by end hosts) of every job's INA all-reduce at once on shared
    slots, simulated (testbed/fabrics/ina/shared_slots.py): collisions depend on how long slots stay held,
    which a chunk sent to the end host itself lengthens."""
    pool, window = ina_window(fabric, workers_per_job)
    return _simulated_shared(fabric.hosts // workers_per_job, workers_per_job, window, pool, frame_s(rate_bps),
                             ina_packets(size_bytes)[0], latency_s)


@functools.lru_cache(maxsize=64)
def _simulated_shared(jobs: int, workers: int, window: int, pool_slots: int, frame_s: float, chunks: int,
                      latency_s: float) -> tuple[float, float]:
    # Beyond SHARED_SIMULATED_CHUNKS a pass streams on at the rate simulated (its collisions have
    # long reached their steady share).
    simulated = min(chunks, SHARED_SIMULATED_CHUNKS)
    exponents = ina_packets(simulated * PAYLOAD_BYTES)[1]
    pool = SharedPool(jobs, workers, window, pool_slots, frame_s)
    time_s, collided = shared_allreduce_s(pool, simulated, exponents, latency_s)
    scale = sum(ina_packets(chunks * PAYLOAD_BYTES)) / (simulated + exponents)
    return 2 * latency_s + (time_s - 2 * latency_s) * scale, collided


def ina_settings(fabric: InaFabric, workers_per_job: int, host_rate_bps: float, aggregation_bps: float | None,
                 seed: int, run_dir: str, measured_packets_per_s: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """(node config, the agents' `ina` config) for an ina fabric at the emulated host rate, on a
    machine whose node program answered `measured_packets_per_s` in calibration."""
    pool, window = ina_window(fabric, workers_per_job)
    # Receivers hold each INA packet for its frame time on these links (hosts/ina/hold.py).
    link_rate = line_rate_bps(host_rate_bps)
    node = {"pool_slots": pool, "sharing": fabric.sharing, "drop_frac": fabric.node_drop_frac, "seed": seed,
            "aggregation_bps": aggregation_bps, "link_rate_bps": link_rate, "ready": f"{run_dir}/ina_node.ready",
            "counters": f"{run_dir}/ina_node.json"}
    agents = {"window": window, "rto_s": default_rto_s(window, fabric.hosts, host_rate_bps,
                                                     sustained_packets_per_s(measured_packets_per_s)),
              # Shared slots: worker 0's link also carries its job's fallback results, up to a
              # window from every worker, so its chunks (which everyone waits on) queue longer.
              "min_rto_s": min_rto_s(window * (1 if fabric.sharing == "reserved" else 1 + workers_per_job),
                                     host_rate_bps),
              "link_rate_bps": link_rate}
    if aggregation_bps:  # a node slower than its ports queues every worker's window in front of it
        queued_s = transfer_time_s(window * fabric.hosts * FRAME_BYTES, aggregation_bps)
        agents["min_rto_s"] = max(agents["min_rto_s"], 1.5 * queued_s + 2e-3)
    return node, agents


@dataclass(frozen=True)
class InaRunTiming:
    """What a run changes in the protocol's real-world timing: its byte scale (each emulated chunk
    stands for 1/v real ones, and each is lost as one) and its timers' floor (MIN_RTO_S of wall time,
    1/dilation of it in real-world time). A prediction without a run: real packets, an exact timer."""

    byte_scale: float = 1.0
    timer_floor_s: float = 0.0

    @classmethod
    def of_run(cls, dilation: float, byte_scale: float) -> "InaRunTiming":
        return cls(byte_scale, MIN_RTO_S / dilation)


def lossy_ina_time_s(fabric: InaFabric, workers: int, size_bytes: float, rate_bps: float, latency_s: float,
                     seed: int, timing: InaRunTiming) -> tuple[float, int]:
    """(time, retransmissions) of one INA all-reduce with the fabric's loss, simulated with the
    workers' window and timeout rules (testbed/fabrics/ina/loss.py) at the timing `timing` gives."""
    v = timing.byte_scale
    _, window = ina_window(fabric, workers)
    outstanding = window * (1 if fabric.sharing == "reserved" else 1 + workers)  # as ina_settings
    floor_s = timing.timer_floor_s
    # The workers' first timeout (default_rto_s) without its allowance for a slow node program,
    # which a real node's line-rate pipeline does not need; it matters only until the first result.
    initial_rto_s = 3 * window * bytes_to_bits(FRAME_BYTES) / (v * rate_bps) + 2.5 * floor_s
    protocol = InaProtocol(workers=workers, window=window, frame_s=frame_s(v * rate_bps),
                           min_rto_s=min_rto_s(outstanding, v * rate_bps, floor_s), initial_rto_s=initial_rto_s)
    chunks, exponents = ina_packets(v * size_bytes)
    return lossy_allreduce_s(protocol, chunks, exponents, latency_s, fabric.link_loss_frac, fabric.node_drop_frac,
                             seed)

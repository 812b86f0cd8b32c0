"""`testbed doctor --calibrate`: measures forwarding capacity (iperf3's, and the agents' own in a
ring all-reduce with their per-step cost), in-host timer precision and the INA node's packet rate."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from testbed.core.calibration import Calibration, load_calibration
from testbed.core.steal import steal_share
from testbed.emulation.live import live_fabric, require_emulation_platform
from testbed.emulation.platform import cpu_sample, datapath
from testbed.emulation.side_processes import wait_node_ready
from testbed.fabrics.ina.node_links import DEFAULT_POOL_SLOTS, MAX_WINDOW
from testbed.model.contracts import InaNodeConfig
from testbed.model.errors import RunFailed
from testbed.planning.scenario_file import make_fabric

PAIRS = 4
IPERF_SECONDS = 4
UNSHAPED_BPS = 10e9  # far above what the datapath forwards, so the datapath is the limit

TIMER_PROBE = """
import json, time
from hosts.timing import lower_timer_slack, precise_sleep
lower_timer_slack()
precise = sorted(precise_sleep(1e-3) for _ in range(1500))
plain = []
for _ in range(300):
    t = time.monotonic(); time.sleep(1e-3); plain.append(time.monotonic() - t - 1e-3)
plain.sort()
print(json.dumps({"precise_p99_s": precise[int(0.99 * len(precise))], "plain_median_s": plain[len(plain) // 2]}))
"""


# The agents themselves (Python, a thread per connection, numpy sums) may forward less than iperf3
# does, and take longer per message than HOST_OVERHEAD_S, where cores are slow. Every host runs the
# agents' ring all-reduce over all of them: of AGENT_BYTES AGENT_ROUNDS times after a first round
# that opens the connections (the median round gives the bytes all of them sent per second), then
# of a few elements TINY_ROUNDS times (the median round over its 2(n-1) steps gives a step's cost).
AGENT_PORT = 5301
AGENT_BYTES = 8 << 20
AGENT_ROUNDS = 5
TINY_ROUNDS = 15
AGENT_PROBE = """
import json, statistics, sys, time
import numpy as np
from hosts.collectives import ring_allreduce
from hosts.transport import TcpTransport
rank, addresses, elements, rounds, tiny = int(sys.argv[1]), sys.argv[2].split(","), *map(int, sys.argv[3:6])
transport = TcpTransport(rank, addresses, int(sys.argv[6]))
group = list(range(len(addresses)))
expected = len(group) * (len(group) + 1) / 2
tag, ok = 0, True

def rounds_s(size, count):
    global tag, ok
    data, seconds = np.full(size, rank + 1, dtype=np.float32), []
    for _ in range(count):
        out, began = data.copy(), time.monotonic()
        ring_allreduce(transport, group, out, tag_base=tag)
        seconds.append(time.monotonic() - began)
        tag += 2 * len(group)
        ok = ok and bool(np.all(out == expected))
    return seconds

rounds_s(elements, 1)
big = rounds_s(elements, rounds)
small = rounds_s(8, tiny)
print(json.dumps({"round_s": statistics.median(big), "tiny_round_s": statistics.median(small), "sum_ok": ok}))
"""

# The aggregation node program's packet rate: INA_WORKERS workers all-reduce int32 buffers of
# INA_PACKETS packets each through a node on an unshaped fabric, INA_ROUNDS times after a first
# round that lines them up, with the runs' largest window; the node is the bottleneck.
INA_WORKERS = 4
INA_PACKETS = 600
INA_ROUNDS = 12
INA_PROBE = """
import json, sys, time
import numpy as np
from hosts.ina.client import InaEndpoint
from hosts.ina.protocol import ELEMENTS_PER_PACKET
me, node, worker, workers, window, packets, rounds = sys.argv[1:8]
endpoint = InaEndpoint(me, node, rto_s=2.0, min_rto=0.05, give_up_s=30.0)
job = endpoint.register(1, int(worker), tuple(workers.split(",")), int(window))
data = np.ones(int(packets) * ELEMENTS_PER_PACKET, dtype=np.int32)
job.allreduce(data.copy())
began = time.monotonic()
for _ in range(int(rounds)):
    job.allreduce(data.copy())
print(json.dumps({"seconds": time.monotonic() - began}))
endpoint.close()
"""
# The first timeout is long: every worker's window queued at a slow machine's node can take a
# good part of a second to answer, and a timeout before the first answer retransmits the window,
# which loads the node with copies. The rounds timed follow the first with the timers adapted.


def _wait_listening(host, port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while f":{port} " not in host.cmd(f"ss -ltnH 'sport = :{port}'") + " ":
        if time.monotonic() > deadline:
            raise RunFailed(f"nothing listened on port {port} in {host.name} {timeout_s:.0f} s into calibration")
        time.sleep(0.02)


def _iperf_pairs(fabric) -> float:
    """Total receiver goodput of PAIRS simultaneous iperf3 TCP streams, in bit/s."""
    servers, clients = [], []
    try:
        for pair in range(PAIRS):
            server = fabric.host(2 * pair + 1)
            servers.append(server.popen(["iperf3", "-s", "-1", "-p", "5201"]))
        for pair in range(PAIRS):
            _wait_listening(fabric.host(2 * pair + 1), 5201)
        for pair in range(PAIRS):
            client, server_ip = fabric.host(2 * pair), fabric.topology.hosts[2 * pair + 1].ip
            clients.append(client.popen(["iperf3", "-c", server_ip, "-p", "5201", "-t", str(IPERF_SECONDS),
                                         "-J", "--connect-timeout", "5000"], stdout=-1, stderr=-1, text=True))
        total = 0.0
        for process in clients:
            out, err = process.communicate(timeout=IPERF_SECONDS + 30)
            try:
                total += json.loads(out)["end"]["sum_received"]["bits_per_second"]
            except (ValueError, KeyError) as error:
                raise RunFailed(f"iperf3 gave no result during calibration: {err.strip() or error}") from None
        return total
    finally:
        for process in servers + clients:
            if process.poll() is None:
                process.kill()
                process.wait()


def _agent_ring(fabric) -> tuple[float, float]:
    """What every host's agent together sent per second in ring all-reduces (bit/s), and the time
    one ring step of a tiny message took them (s)."""
    hosts = fabric.topology.hosts
    n = len(hosts)
    addresses = ",".join(h.ip for h in hosts)
    agents = []
    try:
        for rank in range(n):
            agents.append(fabric.host(rank).popen(
                [sys.executable, "-c", AGENT_PROBE, str(rank), addresses, str(AGENT_BYTES // 4), str(AGENT_ROUNDS),
                 str(TINY_ROUNDS), str(AGENT_PORT)], stdout=-1, stderr=-1, text=True))
        results = [_probe_result(process, "agents' all-reduce probe", 300) for process in agents]
        if not all(r["sum_ok"] for r in results):
            raise RunFailed("the agents' all-reduce probe summed wrongly during calibration")
        # A ring all-reduce sends 2(n-1)/n of the buffer from each of the n hosts, in 2(n-1) steps.
        rate_bps = 8 * 2 * (n - 1) * AGENT_BYTES / max(r["round_s"] for r in results)
        return rate_bps, max(r["tiny_round_s"] for r in results) / (2 * (n - 1))
    finally:
        for process in agents:
            if process.poll() is None:
                process.kill()
                process.communicate()


def _probe_result(process, what: str, timeout_s: float) -> dict:
    """The JSON line a probe program printed inside a host."""
    out, err = process.communicate(timeout=timeout_s)
    match = re.search(r"\{.*\}", out)
    if process.returncode != 0 or match is None:
        raise RunFailed(f"the {what} failed inside a host: {err.strip()[-200:]}")
    return json.loads(match.group(0))


def _timer_probe(fabric) -> dict:
    process = fabric.host(0).popen([sys.executable, "-c", TIMER_PROBE], stdout=-1, stderr=-1, text=True)
    return _probe_result(process, "timer probe", 60)


def _ina_node_rate(fabric, work: Path) -> float:
    """Packets per second the node program received and answered, all workers together."""
    hosts = fabric.topology.hosts
    config = work / "ina_node_config.json"
    config.write_text(InaNodeConfig(pool_slots=DEFAULT_POOL_SLOTS, sharing="reserved", address=hosts[0].ip,
                                    ready=str(work / "ina_node.ready"), counters=str(work / "ina_node.json")).dumps())
    node = fabric.host(0).popen([sys.executable, "-m", "hosts.ina.node", "--config", str(config)],
                                stdout=-1, stderr=-1, text=True)
    workers = []
    try:
        try:
            wait_node_ready(node, work / "ina_node.ready", 30, "during calibration")
        except RunFailed as failed:
            detail = node.communicate()[1][-200:] if node.poll() is not None else ""
            raise RunFailed(f"{failed} {detail}".strip()) from None
        addresses = ",".join(hosts[w].ip for w in range(1, INA_WORKERS + 1))
        for worker in range(INA_WORKERS):
            args = [hosts[worker + 1].ip, hosts[0].ip, str(worker), addresses, str(MAX_WINDOW),
                    str(INA_PACKETS), str(INA_ROUNDS)]
            workers.append(fabric.host(worker + 1).popen([sys.executable, "-c", INA_PROBE, *args],
                                                         stdout=-1, stderr=-1, text=True))
        seconds = max(_probe_result(process, "INA probe", 300)["seconds"] for process in workers)
        return INA_WORKERS * INA_PACKETS * INA_ROUNDS / seconds
    finally:
        for process in [node, *workers]:
            if process.poll() is None:
                process.kill()
                process.communicate()


def calibrate() -> Calibration:
    require_emulation_platform()
    with tempfile.TemporaryDirectory(prefix="testbed-calibrate-") as work:
        fabric = make_fabric(kind="elect-flat", hosts=2 * PAIRS, gpu_bandwidth_gbps=UNSHAPED_BPS / 1e9)
        # A re-calibration waits for the fabric as long as the last calibration says this machine needs.
        with live_fabric(fabric, UNSHAPED_BPS, Path(work), slowness=load_calibration().slowness) as live:
            before = cpu_sample(time.monotonic())
            timers = _timer_probe(live.fabric)
            capacity = _iperf_pairs(live.fabric)
            agent_capacity, agent_step = _agent_ring(live.fabric)
            ina_rate = _ina_node_rate(live.fabric, Path(work))
            after = cpu_sample(time.monotonic())
    return Calibration(
        capacity_bps=capacity,
        agent_capacity_bps=agent_capacity,
        agent_step_s=agent_step,
        timer_error_s=timers["precise_p99_s"],
        sleep_overshoot_s=timers["plain_median_s"],
        ina_node_packets_per_s=ina_rate,
        memory_bytes=float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")),
        datapath=datapath(),
        steal_frac=steal_share(before, after),
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )

"""`testbed doctor --calibrate`: measures forwarding capacity (iperf3's and the agents' own
transport's), in-host timer precision and the INA node's packet rate here."""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from testbed.core.calibration import Calibration
from testbed.core.contracts import InaNodeConfig
from testbed.core.errors import RunFailed
from testbed.core.ina_fabric import DEFAULT_POOL_SLOTS, MAX_WINDOW
from testbed.core.scenario import Fabric
from testbed.emulation.live import live_fabric, require_emulation_platform
from testbed.emulation.platform import datapath

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


# The agents' own transport (Python, a thread per connection) may forward less than iperf3 does
# where cores are slow: PAIRS pairs of it stream 4 MB messages, as the agents' collectives do, for
# IPERF_SECONDS, and each receiver reports its goodput from the first whole message to the last.
AGENT_PORT = 5301
AGENT_PROBE = """
import json, sys, time
import numpy as np
from hosts.transport import TcpTransport
rank, peer, addresses, seconds = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(","), float(sys.argv[4])
transport = TcpTransport(rank, addresses, int(sys.argv[5]))
if rank < peer:
    transport.connect_all([peer])
    payload = np.ones(1 << 20, dtype=np.float32)
    in_flight, tag, began = [], 0, time.monotonic()
    while time.monotonic() - began < seconds:
        in_flight.append(transport.send(peer, tag, payload))
        tag += 1
        if len(in_flight) > 4:
            in_flight.pop(0).wait(60)
    transport.send(peer, tag, payload[:0]).wait(60)
    print(json.dumps({"messages": tag}))
else:
    received, first = 0, None
    while True:
        _, message = transport.recv_any(peer)
        if message.nbytes == 0:
            break
        if first is None:
            first = time.monotonic()
        else:
            received += message.nbytes
        last = time.monotonic()
    print(json.dumps({"bps": 8 * received / (last - first)}))
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
endpoint = InaEndpoint(me, node, rto_s=0.2, min_rto=0.05, give_up_s=30.0)
job = endpoint.register(1, int(worker), tuple(workers.split(",")), int(window))
data = np.ones(int(packets) * ELEMENTS_PER_PACKET, dtype=np.int32)
job.allreduce(data.copy())
began = time.monotonic()
for _ in range(int(rounds)):
    job.allreduce(data.copy())
print(json.dumps({"seconds": time.monotonic() - began}))
endpoint.close()
"""


def _wait_listening(host, port: int, timeout_s: float = 30.0) -> None:
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
            client, server_ip = fabric.host(2 * pair), fabric.topology["hosts"][2 * pair + 1]["ip"]
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


def _agent_pairs(fabric) -> float:
    """Total receiver goodput of PAIRS simultaneous streams of the agents' transport, in bit/s."""
    addresses = ",".join(h["ip"] for h in fabric.topology["hosts"])
    receivers, senders = [], []
    try:
        for pair in range(PAIRS):
            receiver = fabric.host(2 * pair + 1)
            receivers.append(receiver.popen([sys.executable, "-c", AGENT_PROBE, str(2 * pair + 1), str(2 * pair),
                                             addresses, str(IPERF_SECONDS), str(AGENT_PORT)],
                                            stdout=-1, stderr=-1, text=True))
        for pair in range(PAIRS):
            _wait_listening(fabric.host(2 * pair + 1), AGENT_PORT)
        for pair in range(PAIRS):
            senders.append(fabric.host(2 * pair).popen([sys.executable, "-c", AGENT_PROBE, str(2 * pair),
                                                        str(2 * pair + 1), addresses, str(IPERF_SECONDS),
                                                        str(AGENT_PORT)], stdout=-1, stderr=-1, text=True))
        for process in senders:
            _probe_result(process, "agents' transport probe", IPERF_SECONDS + 60)
        return sum(_probe_result(process, "agents' transport probe", 60)["bps"] for process in receivers)
    finally:
        for process in receivers + senders:
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
    hosts = fabric.topology["hosts"]
    config = work / "ina_node_config.json"
    config.write_text(InaNodeConfig(pool_slots=DEFAULT_POOL_SLOTS, sharing="reserved", address=hosts[0]["ip"],
                                    ready=str(work / "ina_node.ready"), counters=str(work / "ina_node.json")).dumps())
    node = fabric.host(0).popen([sys.executable, "-m", "hosts.ina.node", "--config", str(config)],
                                stdout=-1, stderr=-1, text=True)
    workers = []
    try:
        deadline = time.monotonic() + 30
        while not (work / "ina_node.ready").exists():
            if node.poll() is not None or time.monotonic() > deadline:
                detail = node.communicate()[1][-200:] if node.poll() is not None else "no answer in 30 s"
                raise RunFailed(f"the aggregation node did not start during calibration: {detail}")
            time.sleep(0.02)
        addresses = ",".join(hosts[w]["ip"] for w in range(1, INA_WORKERS + 1))
        for worker in range(INA_WORKERS):
            args = [hosts[worker + 1]["ip"], hosts[0]["ip"], str(worker), addresses, str(MAX_WINDOW),
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
        fabric = Fabric(kind="elect-flat", hosts=2 * PAIRS, gpu_bandwidth_gbps=UNSHAPED_BPS / 1e9)
        with live_fabric(fabric, UNSHAPED_BPS, Path(work)) as live:
            timers = _timer_probe(live.fabric)
            capacity = _iperf_pairs(live.fabric)
            agent_capacity = _agent_pairs(live.fabric)
            ina_rate = _ina_node_rate(live.fabric, Path(work))
    return Calibration(
        capacity_bps=capacity,
        agent_capacity_bps=agent_capacity,
        timer_error_s=timers["precise_p99_s"],
        sleep_overshoot_s=timers["plain_median_s"],
        ina_node_packets_per_s=ina_rate,
        datapath=datapath(),
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )

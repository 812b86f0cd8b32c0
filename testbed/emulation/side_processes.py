"""Processes a run starts beside the host agents, inside the fabric's hosts: the INA aggregation
node program and tcpdump. Each is recorded for cleanup, polled for readiness, stopped with
SIGTERM (the node then writes its counters) and can be restarted (a fault)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from testbed.emulation.watched import WatchedProcess
from testbed.fabrics.ina.node_links import ina_settings, ina_workers_per_job
from testbed.fabrics.ina.section import InaFabric
from testbed.model.contracts import InaAgentSettings, InaNodeConfig
from testbed.model.errors import RunFailed
from testbed.model.units import gbps_to_bps
from testbed.shared.ina_rules import DATA_PORT, FALLBACK_PORT

if TYPE_CHECKING:
    from testbed.emulation.live import LiveFabric
    from testbed.workloads.sizing import Prepared

READY_TIMEOUT_S = 30.0


def wait_node_ready(process: subprocess.Popen, ready: Path, timeout_s: float, hint: str) -> None:
    """Poll until the aggregation node program wrote its ready file; RunFailed if it exits first or
    takes longer than `timeout_s` (`hint` says where its output is)."""
    deadline = time.monotonic() + timeout_s
    while not ready.exists():
        if process.poll() is not None:
            raise RunFailed(f"the aggregation node exited with code {process.returncode} at start; {hint}")
        if time.monotonic() > deadline:
            raise RunFailed(f"the aggregation node did not start within {timeout_s:.0f} s; {hint}")
        time.sleep(0.02)


class SideProcesses:
    def __init__(self, live: "LiveFabric", run_dir: Path, env: dict, processes: list[subprocess.Popen]) -> None:
        self.live, self.run_dir, self.env = live, run_dir, env
        self.processes = processes  # the runner's list: it kills what is still running at the end
        self.watched_node = WatchedProcess("the aggregation node", run_dir / "ina_node.log")
        self._node_config_path: Path | None = None
        self.node_restarts = 0

    def start_ina_node(self, prepared: "Prepared") -> InaAgentSettings:
        """The aggregation node program in the node's host; returns the agents' `ina` config."""
        scenario, plan = prepared.scenario, prepared.plan
        fabric = scenario.fabric
        assert isinstance(fabric, InaFabric), "an aggregation node's fabric is an ina fabric"
        node_host = self.live.fabric.topology.hosts[self._node_rank()]
        aggregation_bps = (plan.dilation.emulated_rate_bps(gbps_to_bps(fabric.aggregation_gbps))
                           if fabric.aggregation_gbps else None)
        per_job = ina_workers_per_job(prepared.schedule, fabric)
        node_rate = prepared.ina_node_packets_per_s
        assert node_rate is not None, "prepare sets the node's packet rate for every fabric with a node"
        node_config, agent_config = ina_settings(fabric, per_job, plan.host_rate_bps, aggregation_bps,
                                                 scenario.seed, str(self.run_dir.resolve()), node_rate)
        self._node_config_path = self.run_dir / "ina_node_config.json"
        self._node_config_path.write_text(InaNodeConfig(**node_config, address=node_host.ip).dumps())
        self._launch_node()
        return InaAgentSettings(**agent_config, node=node_host.ip)

    def _node_rank(self) -> int:
        layout = self.live.fabric.topology.ina
        assert layout is not None, "only an ina fabric has an aggregation node"
        return layout.node_rank

    def _launch_node(self) -> None:
        assert self._node_config_path is not None
        config = InaNodeConfig.loads(self._node_config_path.read_text())
        ready = Path(config.ready)
        ready.unlink(missing_ok=True)
        log = open(self.run_dir / "ina_node.log", "ab")
        process = self.live.fabric.host(self._node_rank()).popen(
            [sys.executable, "-m", "hosts.ina.node", "--config", str(self._node_config_path.resolve())],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env)
        log.close()
        self.live.record.add_process(process.pid)
        self.processes.append(process)
        self.watched_node.process = process
        wait_node_ready(process, ready, READY_TIMEOUT_S, f"see {self.run_dir / 'ina_node.log'}")

    def restart_ina_node(self) -> None:
        """A crash and a restart: SIGKILL (no counters written), then a node with empty tables."""
        with self.watched_node.restarting():
            assert self.node is not None
            self.node.kill()
            self.node.wait(timeout=5)
            self.node_restarts += 1
            self._launch_node()

    @property
    def node(self) -> subprocess.Popen[bytes] | None:
        return self.watched_node.process

    def check_alive(self) -> None:
        self.watched_node.check_alive()

    def stop_ina_node(self) -> dict | None:
        """SIGTERM makes the node write its counters; they go into results.json."""
        process = self.watched_node.process
        if process is None:
            return None
        self.watched_node.process = None
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        try:
            report = json.loads((self.run_dir / "ina_node.json").read_text())
        except (OSError, ValueError):
            return None
        report["restarts"] = self.node_restarts
        return report

    def start_capture(self, packets: int) -> None:
        """tcpdump in the aggregation node's host (every port) or GPU 0's; stopped with the agents."""
        topology = self.live.fabric.topology
        rank = topology.ina.node_rank if topology.ina is not None else 0
        out = (self.run_dir / "capture.pcap").resolve()
        log_path = self.run_dir / "capture.log"
        log = open(log_path, "wb")
        process = self.live.fabric.host(rank).popen(
            ["tcpdump", "-i", "any", "-y", "LINUX_SLL", "-U", "-c", str(packets), "-w", str(out)]
            + (["udp", "portrange", f"{DATA_PORT}-{FALLBACK_PORT}"] if topology.ina is not None else ["ip"]),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env)
        log.close()
        self.live.record.add_process(process.pid)
        self.processes.append(process)
        deadline = time.monotonic() + 10.0
        while b"listening" not in log_path.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RunFailed(f"tcpdump did not start; see {log_path}")
            time.sleep(0.02)

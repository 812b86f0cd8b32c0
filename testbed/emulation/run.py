"""One emulation run: scenario → schedule → fabric + controller + host agents → run directory."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path

from testbed.core.faults import FaultInjector, timeline
from testbed.core.shaping import segments_per_packet
from testbed.core.steal import busy_fraction
from testbed.core.watchdog import Progress, connect_timeout_s, describe_stall, stall_bound_s, start_up_bound_s
from testbed.emulation import results as results_mod
from testbed.emulation.fault_actions import FaultActions
from testbed.emulation.live import EmulationBackend, LiveFabric, MininetBackend, RunInterrupted, SignalGuard
from testbed.emulation.platform import cpu_sample, netem_available, ovs_counter_refresh_ms
from testbed.emulation.records import RunMeasurements, RunOutcome
from testbed.emulation.side_processes import SideProcesses
from testbed.emulation.switch_probes import counter_delta, switch_port_counters
from testbed.fabrics.all_kinds import KINDS, behaviour
from testbed.model.contracts import AgentConfig, AgentJob
from testbed.model.errors import RunFailed
from testbed.model.scenario import Scenario
from testbed.model.schedule import cut_pairs
from testbed.model.units import us_to_s
from testbed.planning.scenario_file import scenario_to_yaml
from testbed.shared.collective_plans import barrier_pairs
from testbed.workloads.sizing import Prepared

AGENT_PORT = 5001
# Agents yield the CPU to Open vSwitch and the runner (hosts.timing.lower_priority): at 128 hosts
# on 2 cores, agents at normal priority kept the switch waiting for a CPU at every round's end,
# round trips reached 0.9 s and TCP timed out 31-258 times in three iterations; niced, none did.
AGENT_NICENESS = 10
STOP_TIMEOUT_S = 10.0  # for stopped agents to write what they completed before they are killed
REPORT_TIMEOUT_S = 3.0  # for agents to say what they wait on when the run has stalled


def default_run_dir(scenario: Scenario) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{scenario.name}-{stamp}-{secrets.token_hex(2)}"


@dataclass
class Runner:
    prepared: Prepared
    run_dir: Path
    on_progress: Callable[[int, int], None] = lambda done, total: None  # measured iterations all ranks finished
    on_started: Callable[[], None] = lambda: None  # the fabric is up and the agents are running
    interactive: bool = False  # open Mininet's CLI on the live fabric after the iterations
    hold: bool = False  # keep the fabric up after the iterations until Ctrl-C or SIGTERM
    on_hold: Callable[[], None] = lambda: None  # the iterations are done and the fabric is held
    agents: list[subprocess.Popen] = field(default_factory=list)
    agents_extra: list[subprocess.Popen] = field(default_factory=list)  # e.g. the INA node program
    capture_packets: int = 0  # > 0: tcpdump that many packets into capture.pcap
    injector: FaultInjector | None = None
    measured: RunMeasurements = field(default_factory=RunMeasurements)  # a stopped run keeps what it had
    backend: EmulationBackend = field(default_factory=MininetBackend)  # where the fabric lives

    def execute(self) -> dict:
        # A kind with no switch (INA's node forwards in its own kernel) needs no controller nor OVS.
        self.backend.require_platform(needs_ovs=KINDS[self.prepared.scenario.fabric.kind].controller_app is not None)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # A controller script started beside this run must not find an earlier run's API here.
        (self.run_dir / "controller.ready").unlink(missing_ok=True)
        self._write_inputs()
        outcome = RunOutcome("failed")
        self._set_up_started = time.monotonic()
        timings = self.measured.timings_s
        try:
            smallest_bytes = self.prepared.smallest_message_bytes * self.prepared.plan.dilation.byte_scale
            # Only routed fabrics cap TCP's packets (core.shaping says why); topology.json says so.
            segments = segments_per_packet(smallest_bytes) if KINDS[self.prepared.scenario.fabric.kind].routed else 0
            with SignalGuard(), self.backend.open(self.prepared.scenario.fabric, self.prepared.plan.host_rate_bps,
                                                  self.run_dir, self._controller_extra(),
                                                  self.prepared.calibration.slowness,
                                                  segments, round(1e3 * self.prepared.route_rto_min_s())) as live:
                timings.update(live.timings_s)
                try:
                    self._run_agents(live)
                    if self.interactive:
                        live.fabric.interact()
                    if self.hold and not self.measured.failed_ranks:  # a failed run is not held
                        self.on_hold()
                        _hold(live)
                finally:
                    with SignalGuard(shield=True):
                        self._stop_agents()
                    timings["agents_stopped_s"] = self._since_set_up()
            outcome = RunOutcome("ok")
        except RunInterrupted as why:
            outcome = RunOutcome("interrupted", f"run interrupted by {why}")
        except KeyboardInterrupt:
            outcome = RunOutcome("interrupted", "run interrupted by SIGINT (Ctrl-C)")
        except RunFailed as error:
            outcome = RunOutcome("failed", str(error))
        timings["torn_down_s"] = self._since_set_up()
        if self.injector is not None:
            self.measured.faults = list(self.injector.applied)
        with SignalGuard(hold=True):  # a Ctrl-C now stops what follows this run, not its run directory
            return results_mod.assemble(self.prepared, self.run_dir, self.measured, outcome)

    def _since_set_up(self) -> float:
        return round(time.monotonic() - self._set_up_started, 3)

    def _controller_extra(self) -> dict:
        return {"dilation": self.prepared.plan.dilation.dilation, "byte_scale": self.prepared.plan.dilation.byte_scale,
                "schedule": str((self.run_dir / "schedule.json").resolve()),
                "events": str((self.run_dir / "controller_events.jsonl").resolve())}

    def _write_inputs(self) -> None:
        plan = self.prepared.plan
        resolved = {"dilation": plan.dilation.dilation, "byte_scale": plan.dilation.byte_scale,
                    "warmup_iterations": self.prepared.scenario.warmups()}
        (self.run_dir / "scenario.yaml").write_text(scenario_to_yaml(self.prepared.scenario, resolved))
        (self.run_dir / "schedule.json").write_text(json.dumps(self.prepared.schedule.to_json(), indent=1))
        (self.run_dir / "emulation.json").write_text(json.dumps(plan.to_json(), indent=1))

    def _run_agents(self, live: LiveFabric) -> None:
        fabric, record = live.fabric, live.record
        scenario, plan = self.prepared.scenario, self.prepared.plan
        hosts_dir = self.run_dir / "hosts"
        hosts_dir.mkdir(exist_ok=True)
        for stale in [hosts_dir / "progress", *hosts_dir.glob("h*.*")]:  # an earlier run in this directory
            stale.unlink(missing_ok=True)
        epoch = time.monotonic()
        self.measured.epoch_monotonic_s = epoch
        config = AgentConfig(
            rank_addresses=[h.ip for h in fabric.topology.hosts],
            port=AGENT_PORT,
            dilation=plan.dilation.dilation,
            byte_scale=plan.dilation.byte_scale,
            latency_s=us_to_s(scenario.fabric.latency_us),
            seed=scenario.seed,
            warmup_iterations=scenario.warmups(),
            epoch_monotonic_s=epoch,
            schedule=str((self.run_dir / "schedule.json").resolve()),
            out_dir=str(hosts_dir.resolve()),
            progress=str((hosts_dir / "progress").resolve()),
            niceness=AGENT_NICENESS,
            connect_timeout_s=connect_timeout_s(self.prepared.calibration.slowness),
            jobs=[AgentJob(hosts=hosts, iterations=iterations) for hosts, iterations in self.groups],
        )
        self._check_reachable(list(live.ready.unreachable) if live.ready is not None else [])
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        sides = SideProcesses(live, self.run_dir, env, self.agents_extra)
        if KINDS[scenario.fabric.kind].aggregation_node:
            config = config.model_copy(update={"ina": sides.start_ina_node(self.prepared)})
        config_path = self.run_dir / "agent_config.json"
        config_path.write_text(config.dumps())
        if self.capture_packets > 0:
            sides.start_capture(self.capture_packets)
        self.measured.cpu_samples = [cpu_sample(time.monotonic())]
        ports_before = switch_port_counters(fabric.switch_names)
        if behaviour(scenario.fabric.kind).replans(scenario.fabric):  # only its controller reads the counters
            self.measured.counter_refresh_ms = ovs_counter_refresh_ms()
        for rank in range(self.prepared.schedule.hosts):
            log = open(hosts_dir / f"h{rank}.log", "wb")
            process = fabric.host(rank).popen(
                [sys.executable, "-m", "hosts.agent", "--config", str(config_path.resolve()), "--rank", str(rank)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            )
            log.close()
            self.agents.append(process)
            record.add_process(process.pid)
        self.measured.timings_s["agents_launched_s"] = self._since_set_up()
        if scenario.faults:
            self.injector = FaultInjector(timeline(list(scenario.faults), plan.dilation.dilation), epoch,
                                          plan.dilation.dilation,
                                          FaultActions(live, self.agents, sides, _netem_for(scenario)).apply)
        self.on_started()
        try:
            self._watch(live, sides, hosts_dir)
        finally:
            if self.injector is not None:
                self.injector.stop()
        measured = self.measured
        measured.cpu_busy_frac = busy_fraction(measured.cpu_samples[0], cpu_sample(time.monotonic()))
        measured.switch_packets = counter_delta(ports_before, switch_port_counters(fabric.switch_names))
        measured.ina_node = sides.stop_ina_node()
        measured.failed_ranks = [rank for rank, p in enumerate(self.agents) if p.poll() != 0]

    @cached_property
    def groups(self) -> list[tuple[list[int], int]]:
        """Each job's hosts and measured iterations (empty: one job, every host in one barrier)."""
        return self.prepared.scenario.paced_groups(self.prepared.schedule.hosts)

    def _iterations_done(self, progress: Progress) -> int:
        """Measured iterations done, for the progress bar: every rank's, or, with several jobs,
        the share of its own the job furthest behind has done."""
        scenario = self.prepared.scenario
        warmups, total = scenario.warmups(), scenario.workload.iterations
        groups = self.groups
        if not groups:
            return progress.iterations_done(warmups)
        share = min(min(max(0, min(progress.rounds_done[h] for h in hosts) - warmups), iterations) / iterations
                    for hosts, iterations in groups)
        return int(share * total)

    def _watch(self, live: LiveFabric, sides: SideProcesses, hosts_dir: Path) -> None:
        """Until every agent has exited: fail on a dead controller or side process, a failed agent,
        the overall limit, or a stall (no rank finishing a round for a bound derived from the
        expected round time), which is reported as who waits on whom."""
        scenario, plan = self.prepared.scenario, self.prepared.plan
        total, ranks = scenario.workload.iterations, self.prepared.schedule.hosts
        round_wall_s = plan.dilation.emulated_time_s(self.prepared.prediction.iteration_time_s)
        lossy = scenario.loses_packets()  # rounds then wait out retransmission timeouts
        start_up_s = start_up_bound_s(self.prepared.calibration.slowness)
        limit_s = 30.0 + start_up_s + 4 * plan.expected_wall_s
        deadline = time.monotonic() + limit_s
        progress, read_to, moved_at = Progress((0,) * ranks, 0), 0, time.monotonic()
        timings = self.measured.timings_s
        while any(p.poll() is None for p in self.agents):
            if "agents_started_s" not in timings and progress.lines == 0 and \
                    all((hosts_dir / f"h{rank}.started").exists() for rank in range(ranks)):
                timings["agents_started_s"] = self._since_set_up()
            if "agents_connected_s" not in timings and \
                    all((hosts_dir / f"h{rank}.connected").exists() for rank in range(ranks)):
                # The rounds' clock starts when every rank is connected, however long start-up took
                # (a slow machine's imports); so are faults timed.
                timings["agents_connected_s"] = self._since_set_up()
                moved_at = time.monotonic()
                if self.injector is not None:
                    self.injector.start_at(moved_at)
            live.controller.check_alive()
            sides.check_alive()
            if any(p.poll() not in (None, 0) for p in self.agents):
                break  # one agent failed: the others would wait on it forever
            if time.monotonic() > deadline:
                raise RunFailed(f"host agents did not finish within {limit_s:.0f} s; see {hosts_dir}")
            text, read_to = _read_lines_from(hosts_dir / "progress", read_to)
            if text:
                progress, moved_at = progress.extended(text), time.monotonic()
            if self.injector is not None and self.injector.error:
                raise RunFailed(self.injector.error)
            bound_s = (stall_bound_s(round_wall_s, first_round=progress.lines == 0, lossy=lossy)
                       if "agents_connected_s" in timings else start_up_s)
            if time.monotonic() - moved_at > bound_s:
                raise RunFailed(self._stall_report(time.monotonic() - moved_at, bound_s, hosts_dir))
            self.on_progress(self._iterations_done(progress), total)
            self.measured.cpu_samples.append(cpu_sample(time.monotonic()))
            time.sleep(0.05)
        progress = progress.extended(_read_lines_from(hosts_dir / "progress", read_to)[0])
        self.on_progress(self._iterations_done(progress), total)
        self.measured.cpu_samples.append(cpu_sample(time.monotonic()))
        timings["agents_done_s"] = self._since_set_up()

    def _stall_report(self, stalled_s: float, bound_s: float, hosts_dir: Path) -> str:
        """Asks every live agent what it waits on (SIGUSR1) and says it in one sentence."""
        reports_paths = {rank: hosts_dir / f"h{rank}.waiting.json" for rank in range(len(self.agents))}
        for path in reports_paths.values():
            path.unlink(missing_ok=True)
        # An agent that has not installed its handler yet would die of SIGUSR1: it is still starting.
        live = {rank for rank, p in enumerate(self.agents)
                if p.poll() is None and (hosts_dir / f"h{rank}.started").exists()}
        starting = {rank for rank, p in enumerate(self.agents) if p.poll() is None} - live
        for rank in live:
            self.agents[rank].send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + REPORT_TIMEOUT_S
        while time.monotonic() < deadline and not all(reports_paths[r].exists() for r in live):
            time.sleep(0.02)
        reports = {}
        for rank in live:
            try:
                reports[rank] = json.loads(reports_paths[rank].read_text())
            except (OSError, ValueError):
                reports[rank] = None
        events = results_mod.controller_events(self.run_dir, self.measured.epoch_monotonic_s,
                                               self.prepared.plan.dilation.dilation)
        return describe_stall(stalled_s, bound_s, reports, events, starting=sorted(starting))

    def _check_reachable(self, unreachable: list) -> None:
        """Agents exchange data both ways (TCP acknowledges): every pair that talks needs both paths."""
        groups = [hosts for hosts, _ in self.groups] or [list(range(self.prepared.schedule.hosts))]
        barrier = {pair for group in groups for pair in barrier_pairs(group)}
        cut = cut_pairs(unreachable, self.prepared.schedule.traffic())
        if cut:
            src, dst = cut[0]
            raise RunFailed(f"the planned circuits leave no path from GPU {src} to GPU {dst}, which exchange "
                            f"data; give the fabric more ports (ocs_switches) or another plan")
        cut = cut_pairs(unreachable, barrier)
        if cut:
            # Found here, not as an agent's "no route to host": a job's circuits must join its
            # GPUs in the ring its agents' barrier before each round takes.
            src, dst = cut[0]
            raise RunFailed(f"the planned circuits leave no path from GPU {src} to GPU {dst}, neighbours in the "
                            f"agents' barrier before each round; give the fabric more ports (ocs_switches)")

    def _stop_agents(self) -> None:
        # SIGTERM first: agents write the iterations they completed, the node its counters, tcpdump
        # flushes; whatever has not exited by then is killed.
        running = [p for p in self.agents + self.agents_extra if p.poll() is None]
        for process in running:
            process.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for process in running:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for process in self.agents + self.agents_extra:
            if process.poll() is None:
                process.kill()
        for process in self.agents + self.agents_extra:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def _netem_for(scenario: Scenario) -> bool:
    """Link faults use netem where the kernel has it (probed only when a scenario has one)."""
    return any(f.kind in ("link_loss", "link_down") for f in scenario.faults) and netem_available()


def _hold(live: LiveFabric) -> None:
    """Wait, with the fabric live, until the user stops us; stopping then is not a failure."""
    try:
        while True:
            live.controller.check_alive()
            time.sleep(0.2)
    except (KeyboardInterrupt, RunInterrupted):
        return


def _read_lines_from(path: Path, offset: int) -> tuple[str, int]:
    """The whole lines appended to `path` since byte `offset`, and where they end: the agents
    append to the progress file for the whole run, so each poll reads only what is new."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except OSError:
        return "", offset
    end = chunk.rfind(b"\n") + 1
    return chunk[:end].decode(), offset + end


"""One emulation run: scenario → schedule → fabric + controller + host agents → run directory."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

from testbed import results as results_mod
from testbed.calibration import load_calibration
from testbed.controller_proc import ControllerProcess
from testbed.emulation import EmulationPlan, resolve_emulation
from testbed.errors import EnvironmentProblem, InputError, RunFailed
from testbed.fault_actions import FaultActions
from testbed.faults import FaultInjector, timeline
from testbed.fidelity import DARK_TOLERANCE
from testbed.paths import registry_dir
from testbed.platform import datapath, is_root, mininet_available, ovs_running
from testbed.predict import Prediction, collective_cost, predict
from testbed.registry import RunRecord, clean_orphans, list_bridges, remove_resources
from testbed.scenario import Scenario, scenario_to_yaml
from testbed.side_processes import SideProcesses
from testbed.schedule import Schedule, schedule_for
from testbed.topology import build_topology, reconfig_us
from testbed.units import BITS_PER_BYTE, gbps_to_bps, transfer_time_s, us_to_s
from testbed.watchdog import Progress, describe_stall, stall_bound_s

if TYPE_CHECKING:
    from testbed.fabric import MininetFabric
    from testbed.scenario import Fabric

AGENT_PORT = 5001
READY_TIMEOUT_S = 30.0
# A reconfiguration's rule changes and their barrier take about a millisecond here (DESIGN §8);
# dark time must be accurate to the dark_time monitor's DARK_TOLERANCE.
CONTROL_LATENCY_S = 1e-3
STOP_TIMEOUT_S = 10.0  # for stopped agents to write what they completed before they are killed
REPORT_TIMEOUT_S = 3.0  # for agents to say what they wait on when the run has stalled


class RunInterrupted(Exception):
    """Ctrl-C or SIGTERM during a run."""


@dataclass
class Prepared:
    """Everything decided before any root-only work: pure, so `predict` and tests share it."""

    scenario: Scenario
    schedule: Schedule
    prediction: Prediction
    plan: EmulationPlan
    shortest_event_s: float  # real-world: the shortest message exchange (alpha plus its bytes)
    smallest_message_bytes: float
    expected_rate_bps: float | None = None  # emulated rate a busy transfer should get (None: the host rate)
    pair_rate_frac: dict | None = None  # schedules: the share of B each GPU pair's path carries alone


EMULATED_FABRICS = ("elect-flat", "elect-cluster", "sip-ocs", "sip-ring", "ps", "ina")


def prepare(scenario: Scenario) -> Prepared:
    if scenario.fabric.kind not in EMULATED_FABRICS:
        raise InputError(
            f"{scenario.name}: testbed run emulates {', '.join(EMULATED_FABRICS)} so far (this is "
            f"{scenario.fabric.kind}); model workloads can be placed and predicted on every fabric with "
            f"`testbed place` and `testbed predict`"
        )
    if scenario.workload.kind in ("model", "trace"):
        return _prepare_schedule(scenario)
    schedule = schedule_for(scenario)
    prediction = predict(scenario, schedule)
    workload, fabric = scenario.workload, scenario.fabric
    if workload.algorithm in ("byteps", "ps"):
        return _prepare_byteps(scenario, schedule, prediction)
    assert workload.bytes is not None and workload.collective is not None
    if workload.algorithm == "ina":
        return _prepare_ina(scenario, schedule, prediction)
    cost = collective_cost(workload.collective, workload.algorithm, fabric.hosts, workload.bytes,
                           gbps_to_bps(fabric.gpu_bandwidth_gbps), us_to_s(fabric.latency_us))
    shortest = us_to_s(fabric.latency_us) + transfer_time_s(cost.smallest_message_bytes,
                                                             gbps_to_bps(fabric.gpu_bandwidth_gbps))
    cap = _ina_rate_cap(scenario) if fabric.kind == "ina" else None
    plan = _emulation_plan(scenario, schedule, prediction, shortest, cost.smallest_message_bytes, cap)
    # On fabrics slower than Elect-Flat (a share of circuits, wavelengths, uplinks) busy transfers
    # should see the host rate scaled by how much slower the oracle says the collective is.
    expected = plan.host_rate_bps * min(1.0, cost.time_s / prediction.iteration_time_s)
    return Prepared(scenario, schedule, prediction, plan, shortest, cost.smallest_message_bytes, expected)


def _prepare_schedule(scenario: Scenario) -> Prepared:
    """A placed model's schedule: predicted by simulating the same steps the agents will replay.

    A schedule has hundreds of short steps per GPU, so per-step host overhead is judged against
    the average step (overheads add up along the critical path) rather than the shortest one, and
    messages are sized by their median."""
    from testbed.oracle.schedule_sim import simulate_schedule

    schedule = schedule_for(scenario)
    prediction = simulate_schedule(schedule.to_json(), scenario.fabric)
    steps = max(len(gpu.steps) for gpu in schedule.gpus)
    sizes = sorted(step.bytes for gpu in schedule.gpus for step in gpu.steps if step.kind == "send")
    average_step = prediction.iteration_time_s / max(1, steps)
    # Without point-to-point messages, judge against what a link carries in an average step.
    median = sizes[len(sizes) // 2] if sizes else \
        max(1.0, average_step * gbps_to_bps(scenario.fabric.gpu_bandwidth_gbps) / BITS_PER_BYTE)
    plan = _emulation_plan(scenario, schedule, prediction, average_step, median)
    return Prepared(scenario, schedule, prediction, plan, average_step, _bulk_smallest(sizes, median),
                    pair_rate_frac=_pair_rate_fractions(scenario, schedule))


BULK_SHARE = 0.9  # the message-size monitor judges the messages that carry this share of the bytes


def _bulk_smallest(sizes: list[int], default: float) -> float:
    """The smallest of the messages that carry BULK_SHARE of a schedule's bytes: a few tiny
    messages (biases, small activations) take α, not bandwidth, and distort little when scaled."""
    if not sizes:
        return default
    ignorable, skipped = (1 - BULK_SHARE) * sum(sizes), 0
    for size in sizes:  # ascending
        if skipped + size > ignorable:
            return size
        skipped += size
    return sizes[-1]


def _pair_rate_fractions(scenario: Scenario, schedule: Schedule) -> dict[tuple[int, int], float]:
    """Per GPU pair with traffic, its path's bottleneck capacity over B in the oracle's plan."""
    from testbed.oracle.fabrics import mp_flow_model

    traffic = schedule.traffic()
    try:
        model = mp_flow_model(scenario.fabric, schedule.hosts, 1, traffic)
    except ValueError:
        return {}
    rate = gbps_to_bps(scenario.fabric.gpu_bandwidth_gbps)
    fractions = {}
    for pair in traffic:
        try:
            fractions[pair] = min(model.capacity_bps[r] for r in model.resources(*pair)) / rate
        except (KeyError, ValueError):
            continue
    return fractions


def _ina_rate_cap(scenario: Scenario) -> float:
    from testbed.ina_fabric import max_worker_rate_bps

    return max_worker_rate_bps(scenario.fabric.hosts)


def _prepare_ina(scenario: Scenario, schedule: Schedule, prediction: Prediction) -> Prepared:
    """INA all-reduce: one round of M each way per worker, in packets the node program must keep
    up with, so the emulated rate is also capped by the node's packet rate. A busy worker receives
    results at the rate its port carries INA payload."""
    from hosts.ina.protocol import FRAME_BYTES, PAYLOAD_BYTES
    from testbed.ina_fabric import collision_fraction
    from testbed.shaping import MTU_FRAME_BYTES, TCP_PAYLOAD_BYTES

    fabric, size = scenario.fabric, float(scenario.workload.bytes)
    shortest = prediction.iteration_time_s / 2  # the data round; the exponent round is about α
    plan = _emulation_plan(scenario, schedule, prediction, shortest, size, _ina_rate_cap(scenario))
    payload_share = (PAYLOAD_BYTES / FRAME_BYTES) * (MTU_FRAME_BYTES / TCP_PAYLOAD_BYTES)
    expected = plan.host_rate_bps * payload_share
    if fabric.aggregation_gbps:
        expected = min(expected, plan.host_rate_bps * fabric.aggregation_gbps / fabric.hosts / fabric.gpu_bandwidth_gbps)
    workers = len(schedule.gpus[0].steps[0].group)
    expected /= 1 + collision_fraction(fabric, workers) * (workers - 1)  # everyone waits on the fallback host
    return Prepared(scenario, schedule, prediction, plan, shortest, size, expected)


def _prepare_byteps(scenario: Scenario, schedule: Schedule, prediction: Prediction) -> Prepared:
    """BytePS/PS: its messages are the chunks; a busy link should see the share of the iteration
    that its node's bytes take at the full rate (the load split keeps that share equal)."""
    from testbed.byteps_schedule import instances

    fabric = scenario.fabric
    rate_bps = gbps_to_bps(fabric.gpu_bandwidth_gbps)
    chunk = min(i.size_bytes / i.chunks for i in instances(scenario))
    shortest = us_to_s(fabric.latency_us) + transfer_time_s(chunk, rate_bps)
    plan = _emulation_plan(scenario, schedule, prediction, shortest, chunk)
    # Only the busiest machines report a rate (hosts/byteps.py): they receive the most.
    received = max(sum(column) for column in zip(*schedule.traffic_matrix_bytes))
    busy_s = transfer_time_s(received, rate_bps) / max(1e-12, prediction.breakdown.communication_s)
    return Prepared(scenario, schedule, prediction, plan, shortest, chunk, plan.host_rate_bps * min(1.0, busy_s))


def _emulation_plan(scenario: Scenario, schedule: Schedule, prediction: Prediction, shortest_event_s: float,
                    smallest_message_bytes: float, max_host_rate_bps: float | None = None) -> EmulationPlan:
    """Dilation and byte scale for this schedule: every rank (GPUs and CPU machines) may send at
    once, relaying fabrics forward some packets several times."""
    return resolve_emulation(
        scenario,
        predicted_iteration_s=prediction.iteration_time_s,
        shortest_event_s=shortest_event_s,
        smallest_message_bytes=smallest_message_bytes,
        concurrent_senders=schedule.hosts * _load_factor(scenario, schedule),
        calibration=load_calibration(),
        min_dilation=min_dilation_for(scenario.fabric),
        max_host_rate_bps=max_host_rate_bps,
    )


def _load_factor(scenario: Scenario, schedule: Schedule) -> float:
    """Relaying fabrics forward packets several times: leave the machine capacity for that."""
    from testbed.oracle.fabrics import forwarding_load_factor

    return forwarding_load_factor(scenario.fabric, schedule.traffic())


def min_dilation_for(fabric) -> float:
    """Optical fabrics: the dilated dark time must dwarf the controller's own latency."""
    dark_us = reconfig_us(fabric)
    if fabric.kind not in ("sip-ocs", "sip-ring") or dark_us <= 0:
        return 0.0
    return CONTROL_LATENCY_S / DARK_TOLERANCE / us_to_s(dark_us)


def default_run_dir(scenario: Scenario) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{scenario.name}-{stamp}-{secrets.token_hex(2)}"


def require_emulation_platform(needs_ovs: bool = True) -> None:
    if not is_root():
        raise EnvironmentProblem("testbed run needs root (Mininet creates namespaces and links); use sudo")
    if not mininet_available():
        raise EnvironmentProblem("Mininet is not importable or mnexec is missing; run the set-up script")
    if needs_ovs and not ovs_running():
        raise EnvironmentProblem("Open vSwitch is not running; start it (the set-up script does) and retry")


def _unused_tag() -> str:
    existing = list_bridges()
    taken = {p.stem for p in registry_dir().glob("*.json")} if registry_dir().is_dir() else set()
    while True:
        tag = secrets.token_hex(2)
        if not any(b.startswith(f"tb{tag}s") for b in existing) and tag not in taken:
            return tag


class _SignalGuard:
    """Turns SIGTERM and SIGHUP into RunInterrupted so cleanup runs; `shield=True` (for the cleanup
    itself) ignores SIGINT, SIGTERM and SIGHUP until it is done. Restores the handlers on exit."""

    def __init__(self, shield: bool = False) -> None:
        self.shield = shield

    def __enter__(self):
        def raise_interrupt(signum, frame):
            raise RunInterrupted(signal.Signals(signum).name)

        signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if self.shield else (signal.SIGTERM, signal.SIGHUP)
        handler = signal.SIG_IGN if self.shield else raise_interrupt
        self._old = {sig: signal.signal(sig, handler) for sig in signals}
        return self

    def __exit__(self, *exc):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        return False


@dataclass
class LiveFabric:
    fabric: "MininetFabric"
    controller: ControllerProcess
    record: RunRecord
    ready: dict


@contextmanager
def live_fabric(fabric_spec: "Fabric", host_rate_bps: float, work_dir: Path,
                controller_extra: dict | None = None) -> Iterator[LiveFabric]:
    """A programmed fabric with its controller; everything it made is removed on exit.

    Cleanup runs on success, on exceptions, on Ctrl-C and (through _SignalGuard) on SIGTERM; what a
    SIGKILLed runner leaves is in its registry record for the next run or `testbed clean`.
    `controller_extra` adds to the controller's configuration (optical fabrics need the schedule,
    the dilation and where to write events).
    """
    from testbed.fabric import MininetFabric  # Mininet only where an emulation needs it

    clean_orphans()
    tag = _unused_tag()
    record = RunRecord.new(tag, str(work_dir.resolve()))
    controller = ControllerProcess(work_dir / "controller_config.json", work_dir / "controller.log",
                                   fabric=fabric_spec.kind)
    topology = build_topology(fabric_spec, tag, host_rate_bps, datapath())
    fabric = MininetFabric(topology=topology, controller_port=0, record=record,
                           link_loss_frac=fabric_spec.link_loss_frac)
    switched = bool(topology["switches"])  # an ina fabric has no switch, so no controller either
    try:
        topology_path = work_dir / "topology.json"
        ready_path = work_dir / "controller.ready"
        pids_path = work_dir / "host_pids.json"
        for stale in (ready_path, pids_path, work_dir / "controller_events.jsonl"):
            stale.unlink(missing_ok=True)
        # The topology is known before the network exists: the controller reads it when it starts.
        topology_path.write_text(json.dumps(topology, indent=1))
        config = {"topology": str(topology_path.resolve()), "ready": str(ready_path.resolve()),
                  "host_pids": str(pids_path.resolve()), "host_logs": str((work_dir / "host_config").resolve()),
                  "fabric": fabric_spec.model_dump(exclude_unset=True), **(controller_extra or {})}
        (work_dir / "controller_config.json").write_text(json.dumps(config, indent=1))
        if switched:
            fabric.controller_port = controller.start()
            record.add_process(controller.process.pid)
        fabric.start()
        pids_path.write_text(json.dumps(fabric.host_pids()))
        ready = _wait_ready(controller, ready_path) if switched else {}
        yield LiveFabric(fabric, controller, record, ready)
    finally:
        with _SignalGuard(shield=True):
            # The controller first: a controller still reconfiguring while the hosts go away would
            # log errors for interfaces that no longer exist.
            controller.stop()
            fabric.stop()
            remove_resources(record)


def _wait_ready(controller: ControllerProcess, ready_path: Path) -> dict:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready_path.exists():
        controller.check_alive()
        if time.monotonic() > deadline:
            raise RunFailed(f"the fabric was not programmed within {READY_TIMEOUT_S:.0f} s; "
                            f"see {controller.log_path}")
        time.sleep(0.02)
    return json.loads(ready_path.read_text())


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
    measured: dict = field(default_factory=dict)  # filled as the run goes, so a stopped run keeps it

    def execute(self) -> dict:
        require_emulation_platform(needs_ovs=self.prepared.scenario.fabric.kind != "ina")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # A controller script started beside this run must not find an earlier run's API here.
        (self.run_dir / "controller.ready").unlink(missing_ok=True)
        self._write_inputs()
        outcome: dict = {"status": "failed"}
        try:
            with _SignalGuard(), live_fabric(self.prepared.scenario.fabric, self.prepared.plan.host_rate_bps,
                                             self.run_dir, self._controller_extra()) as live:
                try:
                    self._run_agents(live)
                    if self.interactive:
                        live.fabric.interact()
                    if self.hold and not self.measured["failed_ranks"]:  # a failed run is not held
                        self.on_hold()
                        _hold(live)
                finally:
                    with _SignalGuard(shield=True):
                        self._stop_agents()
            outcome = {"status": "ok"}
        except RunInterrupted as why:
            outcome = {"status": "interrupted", "error": f"run interrupted by {why}"}
        except KeyboardInterrupt:
            outcome = {"status": "interrupted", "error": "run interrupted by SIGINT (Ctrl-C)"}
        except RunFailed as error:
            outcome = {"status": "failed", "error": str(error)}
        measured = dict(self.measured)
        if self.injector is not None:
            measured["faults"] = self.injector.applied
        return results_mod.assemble(self.prepared, self.run_dir, measured, outcome)

    def _controller_extra(self) -> dict:
        return {"dilation": self.prepared.plan.dilation.dilation,
                "schedule": str((self.run_dir / "schedule.json").resolve()),
                "events": str((self.run_dir / "controller_events.jsonl").resolve())}

    def _write_inputs(self) -> None:
        plan = self.prepared.plan
        resolved = {"dilation": plan.dilation.dilation, "byte_scale": plan.dilation.byte_scale,
                    "warmup_iterations": self.prepared.scenario.warmups()}
        (self.run_dir / "scenario.yaml").write_text(scenario_to_yaml(self.prepared.scenario, resolved))
        (self.run_dir / "schedule.json").write_text(json.dumps(self.prepared.schedule.to_json(), indent=1))
        (self.run_dir / "emulation.json").write_text(json.dumps(plan.to_json(), indent=1))

    def _run_agents(self, live: "LiveFabric") -> None:
        fabric, record = live.fabric, live.record
        scenario, plan = self.prepared.scenario, self.prepared.plan
        hosts_dir = self.run_dir / "hosts"
        hosts_dir.mkdir(exist_ok=True)
        for stale in [hosts_dir / "progress", *hosts_dir.glob("h*.*")]:  # an earlier run in this directory
            stale.unlink(missing_ok=True)
        epoch = time.monotonic()
        self.measured["epoch_monotonic_s"] = epoch
        config = {
            "rank_addresses": [h["ip"] for h in fabric.topology["hosts"]],
            "port": AGENT_PORT,
            "dilation": plan.dilation.dilation,
            "byte_scale": plan.dilation.byte_scale,
            "latency_s": us_to_s(scenario.fabric.latency_us),
            "seed": scenario.seed,
            "warmup_iterations": scenario.warmups(),
            "epoch_monotonic_s": epoch,
            "schedule": str((self.run_dir / "schedule.json").resolve()),
            "out_dir": str(hosts_dir.resolve()),
            "progress": str((hosts_dir / "progress").resolve()),
        }
        self._check_reachable(live.ready.get("unreachable", []))
        config_path = self.run_dir / "agent_config.json"
        config_path.write_text(json.dumps(config, indent=1))
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        sides = SideProcesses(live, self.run_dir, env, self.agents_extra)
        if scenario.fabric.kind == "ina":
            config["ina"] = sides.start_ina_node(self.prepared)
            config_path.write_text(json.dumps(config, indent=1))
        if self.capture_packets > 0:
            sides.start_capture(self.capture_packets)
        cpu_before = results_mod.cpu_times()
        ports_before = results_mod.switch_port_counters(fabric.switch_names)
        for rank in range(self.prepared.schedule.hosts):
            log = open(hosts_dir / f"h{rank}.log", "wb")
            process = fabric.host(rank).popen(
                [sys.executable, "-m", "hosts.agent", "--config", str(config_path.resolve()), "--rank", str(rank)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            )
            log.close()
            self.agents.append(process)
            record.add_process(process.pid)
        if scenario.faults:
            self.injector = FaultInjector(timeline(list(scenario.faults), plan.dilation.dilation), epoch,
                                          plan.dilation.dilation, FaultActions(live, self.agents, sides).apply)
            self.injector.start()
        self.on_started()
        try:
            self._watch(live, sides, hosts_dir)
        finally:
            if self.injector is not None:
                self.injector.stop()
        self.measured["cpu_busy_frac"] = results_mod.busy_fraction(cpu_before, results_mod.cpu_times())
        self.measured["switch_packets"] = results_mod.counter_delta(
            ports_before, results_mod.switch_port_counters(fabric.switch_names))
        self.measured["ina_node"] = sides.stop_ina_node()
        self.measured["failed_ranks"] = [rank for rank, p in enumerate(self.agents) if p.poll() != 0]

    def _watch(self, live: "LiveFabric", sides: SideProcesses, hosts_dir: Path) -> None:
        """Until every agent has exited: fail on a dead controller or side process, a failed agent,
        the overall limit, or a stall (no rank finishing a round for a bound derived from the
        expected round time), which is reported as who waits on whom."""
        scenario, plan = self.prepared.scenario, self.prepared.plan
        total, warmups, ranks = scenario.workload.iterations, scenario.warmups(), self.prepared.schedule.hosts
        round_wall_s = plan.expected_wall_s / (total + warmups)
        limit_s = 60.0 + 4 * plan.expected_wall_s
        deadline = time.monotonic() + limit_s
        lines, moved_at = 0, time.monotonic()
        while any(p.poll() is None for p in self.agents):
            live.controller.check_alive()
            sides.check_alive()
            if any(p.poll() not in (None, 0) for p in self.agents):
                break  # one agent failed: the others would wait on it forever
            if time.monotonic() > deadline:
                raise RunFailed(f"host agents did not finish within {limit_s:.0f} s; see {hosts_dir}")
            progress = Progress.parse(_read(hosts_dir / "progress"), ranks)
            if progress.lines != lines:
                lines, moved_at = progress.lines, time.monotonic()
            if self.injector is not None and self.injector.error:
                raise RunFailed(self.injector.error)
            bound_s = stall_bound_s(round_wall_s, first_round=lines == 0)
            if time.monotonic() - moved_at > bound_s:
                raise RunFailed(self._stall_report(time.monotonic() - moved_at, bound_s, hosts_dir))
            self.on_progress(progress.iterations_done(warmups), total)
            time.sleep(0.05)
        self.on_progress(Progress.parse(_read(hosts_dir / "progress"), ranks).iterations_done(warmups), total)

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
        events = results_mod.controller_events(self.run_dir, self.measured.get("epoch_monotonic_s"),
                                               self.prepared.plan.dilation.dilation)
        return describe_stall(stalled_s, bound_s, reports, events, starting=sorted(starting))

    def _check_reachable(self, unreachable: list) -> None:
        """Agents exchange data both ways (TCP acknowledges): every pair that talks needs both paths."""
        talking = set(self.prepared.schedule.traffic())
        for src, dst in unreachable:
            if (src, dst) in talking or (dst, src) in talking:
                raise RunFailed(f"the planned circuits leave no path from GPU {src} to GPU {dst}, which exchange "
                                f"data; give the fabric more ports (ocs_switches) or another plan")

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


def _hold(live: LiveFabric) -> None:
    """Wait, with the fabric live, until the user stops us; stopping then is not a failure."""
    try:
        while True:
            live.controller.check_alive()
            time.sleep(0.2)
    except (KeyboardInterrupt, RunInterrupted):
        return


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


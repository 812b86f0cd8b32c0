"""A live fabric: Mininet hosts and Open vSwitch programmed by the controller, and everything it
made removed on exit, even on Ctrl-C or SIGTERM."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from testbed.core.paths import registry_dir
from testbed.core.shaping import LINUX_RTO_MIN_MS
from testbed.emulation.controller_proc import ControllerProcess
from testbed.emulation.platform import datapath, is_root, mininet_available, ovs_running
from testbed.emulation.registry import RunRecord, clean_orphans, list_bridges, remove_resources
from testbed.fabrics.ina.section import InaFabric
from testbed.fabrics.topology import build_topology
from testbed.model.contracts import ControllerConfig, ControllerReady, Topology
from testbed.model.errors import EnvironmentProblem, RunFailed

if TYPE_CHECKING:
    from testbed.model.fabric_section import FabricSection

# The controller says the fabric is programmed once every switch's ports and rules are confirmed,
# which takes longer the more hosts there are: a fixed allowance plus one per host (at 128 hosts
# it came within 0.01 s of the network being built, 22 s after the start).
READY_BASE_S = 30.0
READY_PER_HOST_S = 0.25


def ready_timeout_s(hosts: int, slowness: float = 1.0) -> float:
    """How long the controller may take to program the fabric (it is checked alive meanwhile): under
    software emulation os-ken and the switches run many times slower."""
    return (READY_BASE_S + READY_PER_HOST_S * hosts) * slowness


class RunInterrupted(Exception):
    """Ctrl-C or SIGTERM during a run."""


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


class SignalGuard:
    """Turns SIGTERM and SIGHUP into RunInterrupted so cleanup runs. `shield=True` (for the cleanup
    itself) ignores SIGINT, SIGTERM and SIGHUP until it is done; `hold=True` (while a run directory
    is written, so it is written whole: a signal raised inside a C extension such as matplotlib's
    renderer surfaces as an unrelated error) keeps them and raises the first on exit,
    KeyboardInterrupt for SIGINT. Restores the handlers on exit."""

    def __init__(self, shield: bool = False, hold: bool = False) -> None:
        self.shield, self.hold = shield, hold
        self.held: list[int] = []

    def __enter__(self):
        def raise_interrupt(signum, frame):
            raise RunInterrupted(signal.Signals(signum).name)

        every = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        if self.hold:
            signals, handler = every, lambda signum, frame: self.held.append(signum)
        elif self.shield:
            signals, handler = every, signal.SIG_IGN
        else:
            signals, handler = (signal.SIGTERM, signal.SIGHUP), raise_interrupt
        self._old = {sig: signal.signal(sig, handler) for sig in signals}
        return self

    def __exit__(self, *exc):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        if self.held and exc[0] is None:
            if self.held[0] == signal.SIGINT:
                raise KeyboardInterrupt
            raise RunInterrupted(signal.Signals(self.held[0]).name)
        return False


class HostNode(Protocol):
    """A host the run starts programs in (a Mininet host, or the loopback fake's local process)."""

    def popen(self, args: list[str], **kwargs: Any) -> subprocess.Popen: ...

    def cmd(self, command: str) -> str: ...


class FabricNetwork(Protocol):
    """What the runner asks of a built network: its topology, its hosts and switches."""

    topology: Topology

    @property
    def switch_names(self) -> list[str]: ...

    def host(self, rank: int) -> HostNode: ...

    def root_node(self) -> HostNode: ...

    def interact(self) -> None: ...


class LiveController(Protocol):
    """The fabric's controller as the runner watches it."""

    @property
    def pid(self) -> int: ...

    def check_alive(self) -> None: ...

    def restart(self) -> None: ...


@dataclass
class LiveFabric:
    fabric: FabricNetwork
    controller: LiveController
    record: RunRecord
    ready: ControllerReady | None  # what the controller said once it programmed the fabric (none: no switch)
    timings_s: dict  # from the start of set-up: network built, fabric programmed


class EmulationBackend(Protocol):
    """Where a run's fabric lives: Mininet and Open vSwitch (MininetBackend), or a fake that starts
    the agents as local processes on loopback (testbed.emulation.loopback) so the runner's
    orchestration is tested without root."""

    def require_platform(self, needs_ovs: bool) -> None: ...

    def open(self, fabric_spec: "FabricSection", host_rate_bps: float, work_dir: Path,
             controller_extra: dict | None = None, slowness: float = 1.0,
             segments_per_packet: int = 0,
             rto_min_ms: int = LINUX_RTO_MIN_MS) -> AbstractContextManager[LiveFabric]: ...


class MininetBackend:
    """Mininet hosts and links, Open vSwitch bridges programmed by the os-ken controller."""

    def require_platform(self, needs_ovs: bool) -> None:
        require_emulation_platform(needs_ovs)

    def open(self, fabric_spec: "FabricSection", host_rate_bps: float, work_dir: Path,
             controller_extra: dict | None = None, slowness: float = 1.0,
             segments_per_packet: int = 0,
             rto_min_ms: int = LINUX_RTO_MIN_MS) -> AbstractContextManager[LiveFabric]:
        return live_fabric(fabric_spec, host_rate_bps, work_dir, controller_extra, slowness, segments_per_packet,
                           rto_min_ms)


@contextmanager
def live_fabric(fabric_spec: "FabricSection", host_rate_bps: float, work_dir: Path,
                controller_extra: dict | None = None, slowness: float = 1.0,
                segments_per_packet: int = 0, rto_min_ms: int = LINUX_RTO_MIN_MS) -> Iterator[LiveFabric]:
    """A programmed fabric with its controller; everything it made is removed on exit.

    Cleanup runs on success, on exceptions, on Ctrl-C and (through SignalGuard) on SIGTERM; what a
    SIGKILLed runner leaves is in its registry record for the next run or `testbed clean`.
    `controller_extra` adds to the controller's configuration (optical fabrics need the schedule,
    the dilation and where to write events). `slowness` (the calibration's) stretches the waits
    for the controller and the switches on a slow machine. `segments_per_packet` and `rto_min_ms`
    go into topology.json for the hosts' set-up (link_setup.host_commands).
    """
    from testbed.emulation.fabric import MininetFabric  # Mininet only where an emulation needs it (not `predict`)

    started = time.monotonic()
    clean_orphans()
    tag = _unused_tag()
    record = RunRecord.new(tag, str(work_dir.resolve()))
    controller = ControllerProcess(work_dir / "controller_config.json", work_dir / "controller.log",
                                   fabric=fabric_spec.kind, slowness=slowness)
    topology = build_topology(fabric_spec, tag, host_rate_bps, datapath(), segments_per_packet, rto_min_ms)
    fabric = MininetFabric(topology=topology, controller_port=0, record=record,
                           link_loss_frac=fabric_spec.link_loss_frac if isinstance(fabric_spec, InaFabric) else 0.0)
    switched = bool(topology.switches)  # an ina fabric has no switch, so no controller either
    try:
        topology_path = work_dir / "topology.json"
        ready_path = work_dir / "controller.ready"
        pids_path = work_dir / "host_pids.json"
        for stale in (ready_path, pids_path, work_dir / "controller_events.jsonl"):
            stale.unlink(missing_ok=True)
        # The topology is known before the network exists: the controller reads it when it starts.
        topology_path.write_text(topology.dumps())
        config = ControllerConfig(topology=str(topology_path.resolve()), ready=str(ready_path.resolve()),
                                  host_pids=str(pids_path.resolve()),
                                  host_logs=str((work_dir / "host_config").resolve()),
                                  fabric=fabric_spec.model_dump(exclude_unset=True), slowness=slowness,
                                  **(controller_extra or {}))
        (work_dir / "controller_config.json").write_text(config.dumps())
        if switched:
            fabric.controller_port = controller.start()
            record.add_process(controller.pid)
        fabric.start()
        timings = {"network_built_s": round(time.monotonic() - started, 3)}
        # Whole or not at all: the controller polls for this file and reads it as soon as it exists
        # (a fresh-clone run read it between its creation and its first byte).
        partial = pids_path.with_suffix(".tmp")
        partial.write_text(json.dumps(fabric.host_pids()))
        partial.replace(pids_path)
        timeout_s = ready_timeout_s(len(topology.hosts), slowness)
        ready = _wait_ready(controller, ready_path, timeout_s) if switched else None
        timings["fabric_programmed_s"] = round(time.monotonic() - started, 3)
        yield LiveFabric(fabric, controller, record, ready, timings)
    finally:
        with SignalGuard(shield=True):
            # The controller first: a controller still reconfiguring while the hosts go away would
            # log errors for interfaces that no longer exist.
            controller.stop()
            fabric.stop()
            remove_resources(record)


def _wait_ready(controller: ControllerProcess, ready_path: Path, timeout_s: float) -> ControllerReady:
    deadline = time.monotonic() + timeout_s
    while not ready_path.exists():
        controller.check_alive()
        if time.monotonic() > deadline:
            raise RunFailed(f"the controller did not say the fabric was programmed (its {ready_path.name} file) "
                            f"within {timeout_s:.0f} s; see {controller.log_path}")
        time.sleep(0.02)
    return ControllerReady.loads(ready_path.read_text(), where=str(ready_path))

"""Fault injection during a run: the scenario's `faults:` as a timeline (pure), and the thread
that applies each fault at its time and undoes timed ones, and the netem commands of a link fault.
The actions themselves (tc or iptables in a host, killing an agent, restarting the controller or the
aggregation node) are the runner's."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from testbed.model.scenario import Fault


@dataclass(frozen=True)
class FaultStep:
    wall_offset_s: float  # after the agents' epoch
    fault: Fault
    index: int
    undo: bool  # the end of a timed fault


def describe(fault: Fault) -> str:
    if fault.kind == "link_loss":
        what = f"{fault.loss_frac or 0:.0%} loss on GPU {fault.host}'s link"
    else:
        what = {"link_down": f"GPU {fault.host}'s link down", "agent_kill": f"GPU {fault.host}'s agent killed",
                "controller_restart": "controller killed and restarted",
                "node_restart": "aggregation node killed and restarted"}[fault.kind]
    until = f" for {fault.duration_ms:g} ms" if fault.duration_ms else ""
    return f"{fault.kind} ({what}{until}) at {fault.at_ms:g} ms"


def timeline(faults: list[Fault], dilation: float) -> list[FaultStep]:
    """Every start and end, in wall-clock order (real-world milliseconds times the dilation)."""
    steps = []
    for index, fault in enumerate(faults):
        steps.append(FaultStep(fault.at_ms * 1e-3 * dilation, fault, index, False))
        if fault.duration_ms:
            steps.append(FaultStep((fault.at_ms + fault.duration_ms) * 1e-3 * dilation, fault, index, True))
    return sorted(steps, key=lambda s: (s.wall_offset_s, s.undo))


def leaf_classes(tc_class_show: str) -> list[str]:
    """The HTB classes in `tc class show` output that no HTB class names as its parent: where an
    interface's packets queue (a netem attached under one shows a class of its own: not HTB's)."""
    classes, parents = [], set()
    for line in tc_class_show.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[:2] == ["class", "htb"]:
            classes.append(fields[2])
            if "parent" in fields[:-1]:
                parents.add(fields[fields.index("parent") + 1])
    return [c for c in classes if c not in parents]


def leaf_queues(tc_qdisc_show: str) -> dict[str, str]:
    """The FIFO each HTB leaf holds, from `tc qdisc show` output (`pfifo limit 20000` by leaf
    class): what clearing a fault puts back, where HTB would graft its default 1,000-frame queue."""
    queues = {}
    for line in tc_qdisc_show.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "qdisc" and fields[1] in ("pfifo", "bfifo") \
                and "parent" in fields[:-1] and "limit" in fields[:-1]:
            limit = fields[fields.index("limit") + 1].rstrip("pb")
            queues[fields[fields.index("parent") + 1]] = f"{fields[1]} limit {limit}"
    return queues


NETEM_LIMIT_PACKETS = 10_000  # netem queues what it delays; with loss only, a queue as deep as HTB's


def netem_commands(step: FaultStep, interface: str, leaves: list[str] | None,
                   queues: dict[str, str] | None = None) -> list[str]:
    """Commands that start or end a lossy or dead link with netem on the egress of one end of it:
    under each of its shaping classes (`leaves`), or as the root qdisc of an unshaped port (None).
    Ending it puts back each leaf's own queue (`queues`, leaf_queues before the fault). Packets are
    lost on the wire, so no sender hears of it (an iptables drop on output fails the sender's own
    call instead)."""
    fault = step.fault
    loss = "100%" if fault.kind == "link_down" else f"{(fault.loss_frac or 0.0) * 100:.4f}%"
    parents = [f"parent {leaf}" for leaf in leaves] if leaves is not None else ["root"]
    if step.undo:  # a leaf's own queue back (else HTB grafts its default); a port its own default
        had = queues or {}
        return [f"tc qdisc replace dev {interface} {parent} {had[parent[7:]]}" if parent[7:] in had
                else f"tc qdisc del dev {interface} {parent}" for parent in parents]
    return [f"tc qdisc replace dev {interface} {parent} netem loss {loss} limit {NETEM_LIMIT_PACKETS}"
            for parent in parents]


class FaultInjector(threading.Thread):
    """Applies `steps` relative to `epoch_s` with `act(step)`; records what it did, in real-world
    milliseconds since the epoch. `stop()` undoes timed faults still active, so a run ends clean."""

    def __init__(self, steps: list[FaultStep], epoch_s: float, dilation: float,
                 act: Callable[[FaultStep], str | None]) -> None:
        super().__init__(name="faults", daemon=True)
        self.steps, self.epoch_s, self.dilation, self.act = steps, epoch_s, dilation, act
        self.clock_s = epoch_s
        self.applied: list[dict[str, Any]] = []
        self.error: str | None = None
        self._active: dict[int, FaultStep] = {}
        self._stopping = threading.Event()
        self._lock = threading.Lock()

    def start_at(self, clock_s: float) -> None:
        """Starts applying the steps, timed from `clock_s` (monotonic wall seconds); what was applied
        is still recorded against the epoch."""
        self.clock_s = clock_s
        self.start()

    def run(self) -> None:
        for step in self.steps:
            if self._stopping.wait(max(0.0, self.clock_s + step.wall_offset_s - time.monotonic())):
                return
            with self._lock:
                if self._stopping.is_set():
                    return
                self._do(step)

    def _do(self, step: FaultStep) -> None:
        try:
            how = self.act(step)
        except Exception as error:  # reported as the run's failure, naming the fault
            self.error = f"injecting {describe(step.fault)} failed: {error}"
            return
        if step.undo:
            self._active.pop(step.index, None)
        elif step.fault.duration_ms:
            self._active[step.index] = step
        self.applied.append({"kind": step.fault.kind, "fault": describe(step.fault), "index": step.index,
                             "phase": "end" if step.undo else "start",
                             "t_s": (time.monotonic() - self.epoch_s) / self.dilation,
                             **({"by": how} if how else {})})

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            for index, step in list(self._active.items()):
                self._do(FaultStep(step.wall_offset_s, step.fault, index, True))
        if self.is_alive():
            self.join(timeout=5)

    def started(self) -> list[str]:
        return [a["fault"] for a in self.applied if a["phase"] == "start"]

"""Records what each run created (bridges, root-namespace links, processes) and removes orphans.

A run writes its record before creating anything and updates it as it goes, so a runner killed
with SIGKILL leaves a record that the next `testbed run` or `testbed clean` uses to remove exactly
what it made. Processes are matched by PID and start time, so a reused PID is never touched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from testbed.core.paths import registry_dir


def process_start_ticks(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot, or None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22; the command name (field 2) may contain spaces, so split after its closing paren.
    return int(stat.rsplit(")", 1)[1].split()[19])


def process_alive(pid: int, start_ticks: int | None) -> bool:
    return start_ticks is not None and process_start_ticks(pid) == start_ticks


@dataclass
class RunRecord:
    run_id: str
    run_dir: str
    runner_pid: int
    runner_start: int | None
    bridges: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    processes: list[tuple[int, int | None]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return registry_dir() / f"{self.run_id}.json"

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.__dict__, indent=1))
        tmp.replace(self.path)

    def add_process(self, pid: int) -> None:
        self.processes.append((pid, process_start_ticks(pid)))
        self.save()

    def runner_alive(self) -> bool:
        return process_alive(self.runner_pid, self.runner_start)

    @classmethod
    def new(cls, run_id: str, run_dir: str) -> "RunRecord":
        pid = os.getpid()
        record = cls(run_id=run_id, run_dir=run_dir, runner_pid=pid, runner_start=process_start_ticks(pid))
        record.save()
        return record

    @classmethod
    def load(cls, path: Path) -> "RunRecord":
        data = json.loads(path.read_text())
        data["processes"] = [tuple(p) for p in data.get("processes", [])]
        return cls(**data)


def list_bridges() -> set[str]:
    """Open vSwitch bridges on this machine (empty if Open vSwitch is absent or down)."""
    try:
        out = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True, text=True,
                             check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(out.stdout.split())


def _quiet(args: list[str]) -> bool:
    return subprocess.run(args, capture_output=True, timeout=30, check=False).returncode == 0


def remove_resources(record: RunRecord) -> dict[str, int]:
    """Kill the record's live processes, delete its bridges and links, drop the record."""
    killed = bridges = links = 0
    for pid, start in record.processes:
        if process_alive(pid, start):
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    existing = list_bridges()
    for bridge in record.bridges:
        if bridge in existing and _quiet(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", bridge]):
            bridges += 1
    for link in record.links:
        if Path(f"/sys/class/net/{link}").exists() and _quiet(["ip", "link", "delete", link]):
            links += 1
    record.path.unlink(missing_ok=True)
    return {"processes": killed, "bridges": bridges, "links": links}


def orphan_records() -> list[RunRecord]:
    """Records whose runner is gone: what they list was left behind by a crashed or killed run."""
    directory = registry_dir()
    if not directory.is_dir():
        return []
    orphans = []
    for path in sorted(directory.glob("*.json")):
        try:
            record = RunRecord.load(path)
        except (OSError, ValueError, TypeError):
            continue
        if not record.runner_alive():
            orphans.append(record)
    return orphans


def clean_orphans() -> dict[str, int]:
    totals = {"runs": 0, "processes": 0, "bridges": 0, "links": 0}
    for record in orphan_records():
        removed = remove_resources(record)
        totals["runs"] += 1
        for key, value in removed.items():
            totals[key] += value
    return totals

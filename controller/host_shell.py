"""Configures hosts from the controller: `ip` and `tc` in batch mode inside each host's network
namespace (entered by PID), once at start-up here, and at agreed instants through the timer process."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from controller.retune_timer import split_by_tool


class HostConfigError(RuntimeError):
    """A host rejected configuration the controller sent."""


def _nsenter(pid: int) -> list[str]:
    return ["nsenter", f"--net=/proc/{pid}/ns/net"]


def run_once(pid: int, lines: list[str], tool: str) -> None:
    """Apply lines synchronously (start-up), failing on the first error."""
    text = split_by_tool(lines).get(tool, "")
    if not text:
        return
    done = subprocess.run(_nsenter(pid) + [tool, "-batch", "-"], input=text, capture_output=True, text=True,
                          timeout=30)
    if done.returncode != 0:
        raise HostConfigError(f"{tool} in the host with PID {pid} failed: {done.stderr.strip()}")


class HostTimer:
    """The controller's handle on the host-configuration timer (controller.retune_timer), a process
    of its own that applies each host's lines at an agreed instant and says when they took effect."""

    def __init__(self, pids: list[int], log_dir: Path) -> None:
        self.log_dir = log_dir
        self.process = subprocess.Popen(
            [sys.executable, "-m", "controller.retune_timer", str(log_dir), *map(str, pids)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.replies: dict[tuple[int, str], dict] = {}
        self.arrived = threading.Condition()
        self.failure: str | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            reply = json.loads(raw)
            with self.arrived:
                if "error" in reply:
                    self.failure = reply["error"]
                else:
                    self.replies[(reply["id"], reply["phase"])] = reply
                self.arrived.notify_all()
        with self.arrived:
            self.failure = self.failure or f"the host-configuration timer exited; see {self.log_dir}"
            self.arrived.notify_all()

    def schedule(self, ident: int, *steps: tuple[str, dict[int, tuple[str, ...]], dict[str, float]]) -> None:
        """Have every host apply each step's lines, in order: a step is (phase, lines by rank, when),
        with when `{"at_s": T}` (CLOCK_MONOTONIC seconds; 0 = at once) or `{"after_s": D}` (D seconds
        after the previous step's agreed instant). Steps sent together reach the timer together."""
        assert self.process.stdin is not None
        if self.failure:
            raise HostConfigError(self.failure)
        request = {"steps": [{"id": ident, "phase": phase, **when,
                              "lines": {str(r): list(l) for r, l in lines.items()}} for phase, lines, when in steps]}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def wait(self, ident: int, phase: str, timeout_s: float) -> dict:
        """The timer's report of a scheduled change: `begun_s` and each host's `done_s`."""
        with self.arrived:
            if not self.arrived.wait_for(lambda: (ident, phase) in self.replies or self.failure, timeout_s):
                raise HostConfigError(f"the hosts did not report the {phase} change of reconfiguration {ident} "
                                      f"within {timeout_s:.0f} s")
            if (ident, phase) not in self.replies:
                raise HostConfigError(self.failure or "the host-configuration timer failed")
            return self.replies.pop((ident, phase))

    def close(self) -> None:
        try:
            if self.process.stdin:
                self.process.stdin.close()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()

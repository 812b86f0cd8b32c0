"""Configures hosts from the controller: `ip` and `tc` in batch mode inside each host's network
namespace (entered by PID), fed line by line so a change takes effect in well under a millisecond."""

from __future__ import annotations

import subprocess
from pathlib import Path


class HostConfigError(RuntimeError):
    """A host rejected configuration the controller sent."""


def _nsenter(pid: int) -> list[str]:
    return ["nsenter", f"--net=/proc/{pid}/ns/net"]


def run_once(pid: int, lines: list[str], tool: str) -> None:
    """Apply lines synchronously (start-up), failing on the first error."""
    text = "".join(line.split(" ", 1)[1] + "\n" for line in lines if line.startswith(tool + " "))
    if not text:
        return
    done = subprocess.run(_nsenter(pid) + [tool, "-batch", "-"], input=text, capture_output=True, text=True,
                          timeout=30)
    if done.returncode != 0:
        raise HostConfigError(f"{tool} in the host with PID {pid} failed: {done.stderr.strip()}")


class HostShells:
    """Long-lived `ip -batch -` and `tc -batch -` per host; errors go to one log per host, which the
    run checks at the end."""

    def __init__(self, pids: list[int], log_dir: Path) -> None:
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.shells: dict[tuple[int, str], subprocess.Popen] = {}
        for rank, pid in enumerate(pids):
            for tool in ("ip", "tc"):
                err = open(log_dir / f"h{rank}.{tool}.err", "ab")
                self.shells[(rank, tool)] = subprocess.Popen(
                    _nsenter(pid) + [tool, "-force", "-batch", "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                    stderr=err, text=True, bufsize=1)
                err.close()

    def send(self, rank: int, lines: tuple[str, ...] | list[str]) -> None:
        for tool in ("tc", "ip"):
            text = "".join(line.split(" ", 1)[1] + "\n" for line in lines if line.startswith(tool + " "))
            if text:
                shell = self.shells[(rank, tool)]
                if shell.poll() is not None:
                    raise HostConfigError(f"the {tool} shell of host {rank} exited; see {self.log_dir}")
                shell.stdin.write(text)
                shell.stdin.flush()

    def close(self) -> None:
        for shell in self.shells.values():
            try:
                shell.stdin.close()
                shell.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                shell.kill()

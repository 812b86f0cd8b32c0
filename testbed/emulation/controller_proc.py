"""Runs the os-ken controller in its own process on a free port, and verifies who listens there."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from testbed.emulation.watched import WatchedProcess
from testbed.model.errors import RunFailed

TCP_LISTEN_STATE = "0A"
STOP_TIMEOUT_S = 5.0  # for the controller's process group to exit after each signal


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def listening_inodes(port: int) -> set[str]:
    """Inodes of sockets listening on TCP `port` (any address), from /proc/net/tcp{,6}."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == TCP_LISTEN_STATE and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def socket_inodes_of(pid: int) -> set[str]:
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        for fd in fd_dir.iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


START_TIMEOUT_S = 20.0  # to listen on its port, on a machine of calibrated slowness 1


class ControllerProcess(WatchedProcess):
    """The controller for one run; `start` returns once it alone listens on its port."""

    def __init__(self, config_path: Path, log_path: Path, fabric: str = "elect-flat", slowness: float = 1.0) -> None:
        super().__init__("the controller", log_path)
        self.config_path = config_path
        self.fabric = fabric
        self.port = 0
        # os-ken's imports alone take seconds here and many times that under software emulation.
        self.start_timeout_s = START_TIMEOUT_S * slowness

    def start(self, port: int | None = None) -> int:
        timeout_s = self.start_timeout_s
        self.port = port or free_port()
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "controller.launch", "--port", str(self.port), "--config",
             str(self.config_path), "--fabric", self.fabric],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C reaches the runner, which stops us in order
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RunFailed(f"the controller exited with code {self.process.returncode} at start; "
                                f"see {self.log_path}")
            listeners = listening_inodes(self.port)
            if listeners:
                ours = socket_inodes_of(self.process.pid)
                if not listeners <= ours:
                    raise RunFailed(f"another process also listens on controller port {self.port}; "
                                    "a stale controller would steal switches, so this run stops")
                return self.port
            time.sleep(0.02)
        raise RunFailed(f"the controller did not listen on port {self.port} within {timeout_s:.0f} s; "
                        f"see {self.log_path}")

    def restart(self) -> None:
        """A crash (SIGKILL) and a new controller on the same port: the switches keep their rules
        while it is away (fail-secure) and reconnect to it; it re-reads its configuration and
        installs its plan again."""
        with self.restarting():
            self._end_group(signal.SIGKILL)
            self.start(port=self.port)

    def stop(self) -> None:
        if self.process is None:
            return
        self._end_group(signal.SIGTERM)
        self.process = None

    def _end_group(self, signum: int) -> None:
        """Ends the controller and what it started (its timer process and the timer's host shells),
        which share its process group: a shell still applying a change while the fabric goes away
        would report devices that no longer exist."""
        assert self.process is not None
        group = self.process.pid  # started in a session of its own: it leads the group
        for sig in (signum, signal.SIGKILL):
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while time.monotonic() < deadline:
                self.process.poll()  # reap the leader, or the group never empties
                try:
                    os.killpg(group, 0)
                except ProcessLookupError:
                    return
                time.sleep(0.02)

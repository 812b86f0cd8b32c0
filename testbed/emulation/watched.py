"""A process the runner watches that a fault may kill and start again (the controller, the INA
node): while it restarts, the liveness check, which runs in another thread, does not call it dead."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from testbed.model.errors import RunFailed


class WatchedProcess:
    def __init__(self, what: str, log_path: Path) -> None:
        self.what = what  # e.g. "the controller", for messages
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self._restarting = False

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RunFailed(f"{self.what} is not running")
        return self.process.pid

    @contextmanager
    def restarting(self) -> Iterator[None]:
        """Around a kill and a new start."""
        if self.process is None:
            raise RunFailed(f"there is no {self.what.removeprefix('the ')} to restart")
        self._restarting = True
        try:
            yield
        finally:
            self._restarting = False

    def check_alive(self) -> None:
        if self._restarting:
            return
        if self.process is not None and self.process.poll() is not None:
            raise RunFailed(f"{self.what} exited with code {self.process.returncode}; see {self.log_path}")

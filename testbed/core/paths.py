"""Where the testbed keeps machine state: calibration and the registry of live runs."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """Persistent machine state (calibration). Override with TESTBED_STATE_DIR."""
    return Path(os.environ.get("TESTBED_STATE_DIR", "/var/lib/testbed"))


def registry_dir() -> Path:
    """Records of what each live run created; on tmpfs so a reboot clears it with the namespaces."""
    return Path(os.environ.get("TESTBED_REGISTRY_DIR", "/run/testbed"))


def calibration_path() -> Path:
    return state_dir() / "calibration.json"

"""Fixtures of the root integration tests: what exists before a test must exist, and only that, after it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from testbed.registry import list_bridges

OURS = ("hosts.agent", "controller.launch", "mininet:h", "hosts.ina.node")


def our_processes() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(marker in cmdline for marker in OURS):
                found.add(int(entry.name))
    return found


@pytest.fixture
def machine_state(scratch_registry):
    """What exists before a test; the test asserts that the same is true after it."""
    before = (list_bridges(), our_processes())
    yield before

    def leftovers():
        return list_bridges() - before[0], our_processes() - before[1]

    deadline = time.monotonic() + 10
    while any(leftovers()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers() == (set(), set()), "the run left bridges or processes behind"
    assert not list(scratch_registry.glob("*.json")), "the run left its registry record"



"""Fixtures of the root integration tests: what exists before a test must exist, and only that, after it.

Tolerances, and why they are enough (each test names the one it uses):
- RATIO_BAND, emulated/predicted of a whole run: the benches measured every scenario these tests
  run at 0.92-1.07 over repeated runs on a loaded 2-core machine (README, bench/results); ±15% is
  twice the widest deviation seen, so a run crosses it only when the model or the emulation broke,
  or when the machine dropped packets and an iteration waited out TCP retransmission timeouts,
  which the run then reports itself (assert_iterations_match_the_oracle).
- Dark times: the hosts switch over within 0.2-2 ms of each agreed instant (measured at 8-32 GPUs,
  bench/results/optical.md) against a dark time of at least 10 ms of wall time, so a single
  reconfiguration stays within ±20% and an average within the monitor's ±10%.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from testbed.emulation.registry import list_bridges

RATIO_BAND = (0.85, 1.15)


def unfaithful(result: dict) -> dict[str, str]:
    """The monitors that failed in a run, each with what it measured and its suggested fix: what an
    assertion on fidelity prints, since the whole fidelity record is too long to survive truncation."""
    return {name: f"{m['detail']} ({m['fix']})" for name, m in result["fidelity"]["monitors"].items()
            if not m["ok"]}


# Monitors that report packets this machine lost under load (a queue, the datapath, a TCP timer),
# not a fault of the model or of the emulation's settings: a run flags them itself, per iteration.
MACHINE_LOSS_MONITORS = frozenset({"retransmissions", "stalls", "drops"})


def lossy_iterations(result: dict) -> set[int]:
    """Iterations the run itself flags for waiting out a TCP timer after the machine lost a packet."""
    monitors = result["fidelity"]["monitors"]
    flagged = set()
    if not monitors["retransmissions"]["ok"]:
        flagged |= {i for i, n in enumerate(result["iteration_tcp_timeouts"]) if n}
    if not monitors["stalls"]["ok"]:
        flagged |= {i for i, n in enumerate(result["iteration_stalls"]) if n}
    return flagged


def assert_faithful_but_for_machine_loss(result: dict) -> set[int]:
    """Every monitor of the model and the emulation's settings passes; returns the iterations the run
    flagged for packets this machine lost, which a test then leaves out (at least one must remain)."""
    failing = unfaithful(result)
    assert not set(failing) - MACHINE_LOSS_MONITORS, failing
    flagged = lossy_iterations(result)
    assert len(flagged) < len(result["iteration_times_s"]), failing
    return flagged


def assert_iterations_match_the_oracle(result: dict, band: tuple[float, float] = RATIO_BAND) -> None:
    """Every iteration's emulated/predicted is within `band`, except one the run itself calls not
    faithful because the machine lost a packet and it waited for a TCP timer: the
    `retransmissions` monitor names iterations with retransmission timeouts, the `stalls` monitor
    those where a collective step waited for a lost tail segment's loss probe (each at least 200 ms
    of wall time, which no dilation hides); at least one iteration is within the band."""
    monitors = result["fidelity"]["monitors"]
    flagged = lossy_iterations(result)
    ratios = result["emulated_over_predicted"]
    outside = [i for i, r in enumerate(ratios) if not band[0] <= r <= band[1]]
    assert set(outside) <= flagged, (ratios, monitors["retransmissions"], monitors["stalls"])
    assert len(outside) < len(ratios), (ratios, monitors["retransmissions"], monitors["stalls"])
OURS = ("hosts.agent", "controller.launch", "controller.retune_timer", "mininet:h", "hosts.ina.node")


def our_processes() -> set[int]:
    return processes_matching(OURS)


def processes_matching(markers: tuple[str, ...]) -> set[int]:
    """PIDs of the processes whose command line contains one of `markers`."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(marker in cmdline for marker in markers):
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



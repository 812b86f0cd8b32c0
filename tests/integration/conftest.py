"""Fixtures of the root integration tests: what exists before a test must exist, and only that, after it.

Tolerances, and why they are enough (each test names the one it uses):
- RATIO_BAND, emulated/predicted of a whole run: the benches measured every scenario these tests
  run at 0.92-1.07 over repeated runs on a loaded 2-core machine (README, bench/results); ±15% is
  twice the widest deviation seen, so a run crosses it only when the model or the emulation broke,
  or when the machine dropped packets and an iteration waited out TCP retransmission timeouts,
  or when the hypervisor of a shared host took the CPUs away (steal): the run reports both itself,
  per iteration, and such iterations may be longer, never shorter (assert_iterations_match_the_oracle).
  A run that blames the hypervisor may fail any monitor measured at run time; the settings' monitors
  must pass (assert_faithful). On a quiet machine these exemptions are empty and every check bites.
- Dark times: the hosts switch over within 0.2-2 ms of each agreed instant (measured at 8-32 GPUs,
  bench/results/optical.md) against a dark time of at least 10 ms of wall time, so a single
  reconfiguration stays within ±20% and an average within the monitor's ±10%.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from testbed.core.fidelity import STEAL_TOLERANCE
from testbed.core.steal import CpuSample, steal_fractions
from testbed.emulation.platform import cpu_sample
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
# Monitors of the emulation's settings, which no state of the machine excuses.
SETTINGS_MONITORS = frozenset({"capacity", "message_size"})


def steal_disturbed(result: dict) -> set[int]:
    """Iterations during which the hypervisor took more of the CPUs than the `steal` monitor allows:
    on a shared host the machine that was calibrated was not all there, which the run says itself."""
    if result["fidelity"]["monitors"]["steal"]["ok"]:
        return set()
    return {i for i, f in enumerate(result["iteration_steal_frac"]) if f is not None and f > STEAL_TOLERANCE}


def lossy_iterations(result: dict) -> set[int]:
    """Iterations the run itself flags for waiting out a TCP timer after the machine lost a packet."""
    monitors = result["fidelity"]["monitors"]
    flagged = set()
    if not monitors["retransmissions"]["ok"]:
        flagged |= {i for i, n in enumerate(result["iteration_tcp_timeouts"]) if n}
    if not monitors["stalls"]["ok"]:
        flagged |= {i for i, n in enumerate(result["iteration_stalls"]) if n}
    return flagged


def disturbed_iterations(result: dict) -> set[int]:
    """Iterations the run itself calls not faithful because of the machine: a lost packet's TCP
    timer, or a hypervisor that took the CPUs away."""
    return lossy_iterations(result) | steal_disturbed(result)


def excused_monitors(result: dict) -> frozenset[str]:
    """Monitors a test lets fail because the run blames the machine for them: lost packets always;
    while the hypervisor took the CPUs away, anything measured at run time (rates, timers, dark
    times), never the emulation's settings."""
    if steal_disturbed(result):
        return frozenset(result["fidelity"]["monitors"]) - SETTINGS_MONITORS
    return MACHINE_LOSS_MONITORS


def assert_faithful(result: dict, excuse_machine_loss: bool = False) -> None:
    """Every monitor passes, but for those the run blames on the hypervisor taking the CPUs away (and
    on packets the machine lost, with `excuse_machine_loss`)."""
    excused = excused_monitors(result) if steal_disturbed(result) or excuse_machine_loss else frozenset()
    failing = unfaithful(result)
    assert not set(failing) - excused, failing


def assert_monitor_ok(result: dict, name: str) -> None:
    """One monitor passes, unless the run blames the hypervisor for its failing."""
    monitor = result["fidelity"]["monitors"][name]
    assert monitor["ok"] or (steal_disturbed(result) and name not in SETTINGS_MONITORS), monitor


def assert_faithful_but_for_machine_loss(result: dict) -> set[int]:
    """Every monitor of the model and the emulation's settings passes; returns the iterations the run
    flagged for packets this machine lost or CPUs its hypervisor took, which a test then leaves out
    (at least one must remain unless the hypervisor disturbed every iteration)."""
    assert_faithful(result, excuse_machine_loss=True)
    flagged = disturbed_iterations(result)
    everything = set(range(len(result["iteration_times_s"])))
    assert len(flagged) < len(everything) or steal_disturbed(result) == everything, unfaithful(result)
    return flagged


def undisturbed_times_s(result: dict) -> list[float]:
    """Iteration times the run does not blame on the machine (a test compares runs by these)."""
    disturbed = disturbed_iterations(result)
    return [t for i, t in enumerate(result["iteration_times_s"]) if i not in disturbed]


def assert_ratio_in_band(result: dict, iteration: int, band: tuple[float, float] = RATIO_BAND) -> None:
    """One iteration's emulated/predicted is within `band`; one the run flags as disturbed by the
    machine may be longer, never shorter (lost CPUs and packets only ever cost time)."""
    ratio = result["emulated_over_predicted"][iteration]
    low_ok = band[0] <= ratio
    assert low_ok and (ratio <= band[1] or iteration in disturbed_iterations(result)), \
        (iteration, result["emulated_over_predicted"], result["iteration_steal_frac"], unfaithful(result))


def assert_iterations_match_the_oracle(result: dict, band: tuple[float, float] = RATIO_BAND) -> None:
    """Every iteration's emulated/predicted is within `band`, except one the run itself calls not
    faithful because of the machine, which may only be longer: the `retransmissions` monitor names
    iterations with retransmission timeouts, the `stalls` monitor those where a collective step
    waited for a lost tail segment's loss probe (each at least 200 ms of wall time, which no
    dilation hides), the `steal` monitor those during which the hypervisor took the CPUs away. At
    least one iteration is within the band, unless the hypervisor disturbed every one."""
    ratios = result["emulated_over_predicted"]
    for i in range(len(ratios)):
        assert_ratio_in_band(result, i, band)
    outside = [i for i, r in enumerate(ratios) if not band[0] <= r <= band[1]]
    assert len(outside) < len(ratios) or steal_disturbed(result) == set(range(len(ratios))), \
        (ratios, result["iteration_steal_frac"], unfaithful(result))


class StealWatch:
    """Samples the kernel's CPU counters every 0.1 s while a block runs: for what a test measures
    outside the run's iterations (a controller script's dark times), whose steal the run cannot report."""

    def __init__(self, every_s: float = 0.1):
        self.every_s = every_s
        self.samples: list[CpuSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.samples.append(cpu_sample(time.monotonic()))
            if self._stop.wait(self.every_s):
                return

    def __enter__(self) -> StealWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def worst_share(self, window_s: float = 1.0) -> float:
        """The largest share of the cores the hypervisor took in any `window_s` while the block ran."""
        windows = [(s.t_s, s.t_s + window_s) for s in self.samples if s.t_s + window_s <= self.samples[-1].t_s]
        windows = windows or [(self.samples[0].t_s, self.samples[-1].t_s)]
        return max((f for f in steal_fractions(self.samples, windows) if f is not None), default=0.0)

    def disturbed(self) -> bool:
        """The hypervisor took more than the `steal` monitor allows a run, for a second or more."""
        return self.worst_share() > STEAL_TOLERANCE


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



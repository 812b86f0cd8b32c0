"""This machine's measured limits (forwarding capacity, timer precision), stored for `auto` dilation."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from testbed.core.paths import calibration_path

# The INA node's rate where `doctor --calibrate` has not measured it: what it measured on the
# 2-core machine docs/setup.md describes.
INA_NODE_PACKETS_PER_S = 45_000


@dataclass(frozen=True)
class Calibration:
    capacity_bps: float  # total TCP goodput the datapath forwarded, all pairs together
    timer_error_s: float  # p99 error of a precise (sleep-then-spin) wait inside a host
    sleep_overshoot_s: float  # median overshoot of a plain time.sleep inside a host
    datapath: str
    measured_at: str
    measured: bool = True
    # Packets/s the INA node program answered with workers sharing the cores (None: measured by an
    # older calibration, before this was part of it).
    ina_node_packets_per_s: float | None = None
    # Goodput of the agents themselves (their transport and sums) in a ring all-reduce of all the
    # hosts: where cores are slow it is below what iperf3 gets through, and the agents are what must
    # keep up (None: not measured).
    agent_capacity_bps: float | None = None
    # One ring step of a tiny message between the agents (thread hand-offs, a sum, two wake-ups).
    agent_step_s: float | None = None
    # The machine's physical memory: every rank's buffers, scaled by the byte scale, share it.
    memory_bytes: float | None = None
    # The share of all cores' time a hypervisor took while this was measured (steal): a calibration
    # taken while the host was busy with others measured less than this machine forwards when quiet.
    steal_frac: float | None = None

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @property
    def usable_capacity_bps(self) -> float:
        """What runs can offer: the datapath's capacity, or the agents' where they forward less."""
        return min(self.capacity_bps, self.agent_capacity_bps or self.capacity_bps)

    @property
    def slowness(self) -> float:
        """How many times slower than the reference machine this one runs the agents (at least 1)."""
        return max(1.0, (self.agent_step_s or 0.0) / REFERENCE_STEP_S)

    @property
    def node_packets_per_s(self) -> float:
        """The INA node's measured packet rate, or the reference machine's if never measured."""
        return self.ina_node_packets_per_s or INA_NODE_PACKETS_PER_S


# A ring step of the agents on the 2-core machine docs/setup.md describes (0.6-0.7 ms measured), rounded up:
# machines slower than this get their waits for start-up stretched by how much slower they are.
REFERENCE_STEP_S = 1e-3


# Conservative stand-ins used until `testbed doctor --calibrate` has run (that machine's figures, halved).
DEFAULT_CALIBRATION = Calibration(
    capacity_bps=0.5e9,
    timer_error_s=200e-6,
    sleep_overshoot_s=100e-6,
    datapath="user",
    measured_at="never",
    measured=False,
    ina_node_packets_per_s=INA_NODE_PACKETS_PER_S / 2,
)


def load_calibration(path: Path | None = None) -> Calibration:
    """The stored calibration, or the conservative defaults if none was measured."""
    path = path or calibration_path()
    try:
        data = json.loads(path.read_text())
        return Calibration(**data)
    except (OSError, ValueError, TypeError):
        return DEFAULT_CALIBRATION


def store_calibration(calibration: Calibration, path: Path | None = None) -> Path:
    path = path or calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(calibration.to_json(), indent=2) + "\n")
    return path

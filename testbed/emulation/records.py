"""What a run hands to its results: the measurements the runner took as it went and how the run
ended. Typed, so the results can be assembled (and unit-tested) from records, not dictionaries."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from testbed.core.steal import CpuSample

Status = Literal["ok", "failed", "interrupted"]


@dataclass(frozen=True)
class SwitchPackets:
    """Packets the fabric's switch ports received, and dropped, during the measured run."""

    packets: int
    dropped: int

    def to_json(self) -> dict[str, int]:
        return {"packets": self.packets, "dropped": self.dropped}


@dataclass
class RunMeasurements:
    """Filled by the runner as the run goes, so a run stopped half-way keeps what it measured."""

    timings_s: dict[str, float] = field(default_factory=dict)  # from the start of set-up
    epoch_monotonic_s: float | None = None  # the agents' clock origin
    cpu_samples: list[CpuSample] = field(default_factory=list)
    cpu_busy_frac: float | None = None
    switch_packets: SwitchPackets | None = None
    # Open vSwitch's flow-counter refresh (ms), read where the controller re-plans from those counters
    counter_refresh_ms: int | None = None
    ina_node: dict[str, Any] | None = None  # the aggregation node's own report
    failed_ranks: list[int] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)  # the faults applied, as the injector logged them


@dataclass(frozen=True)
class RunOutcome:
    """How the run ended, as the runner saw it; results may still fail it (sums, hosts' errors)."""

    status: Status
    error: str | None = None

    def failed(self, error: str) -> RunOutcome:
        return RunOutcome("failed", error)

    def explained(self, error: str | None) -> RunOutcome:
        return replace(self, error=error)

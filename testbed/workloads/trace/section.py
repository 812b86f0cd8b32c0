"""The `trace` workload's scenario section: a JSON schedule or trace file each GPU replays."""

from __future__ import annotations

from typing import ClassVar, Literal

from testbed.model.workload_section import WorkloadSection


class TraceWorkload(WorkloadSection):
    description: ClassVar[str] = "a JSON schedule or trace file, each GPU replaying its steps"
    kind: Literal["trace"]
    trace: str  # a JSON schedule or trace file, relative to the scenario

    def describe(self) -> str:
        return f"trace {self.trace}"

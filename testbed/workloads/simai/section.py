"""The `simai` workload's scenario section: a workload file as SimAI's AICB writes it."""

from __future__ import annotations

from typing import ClassVar, Literal

from testbed.model.workload_section import WorkloadSection


class SimaiWorkload(WorkloadSection):
    description: ClassVar[str] = ("a text workload file as SimAI's AICB writes and ASTRA-sim 1.x reads it "
                                  "(docs/large-models.md)")
    kind: Literal["simai"]
    path: str  # the workload file (MICRO, DATA, MODEL or HYBRID_TRANSFORMER[_FWD_IN_BCKWD]), relative to the scenario

    def describe(self) -> str:
        return f"SimAI workload {self.path}"

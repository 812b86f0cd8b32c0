"""The `jobs` workload's section: written as the scenario's top-level `jobs:` list, whose jobs run
together on one fabric, each at its own pace."""

from __future__ import annotations

from typing import ClassVar, Literal

from testbed.model.workload_section import WorkloadSection


class JobsWorkload(WorkloadSection):
    description: ClassVar[str] = "several jobs on one fabric, written as the top-level `jobs:` list (below)"
    kind: Literal["jobs"]  # iterations: as the job that asks most

    runs_as_job: ClassVar[bool] = False

    def fits(self, hosts: int, whose: str) -> None:
        raise ValueError("workload kind jobs is written as a top-level jobs: list")

    def job_refusal(self) -> str | None:
        return "a job's workload cannot itself be jobs"

    def describe(self) -> str:
        return "jobs"

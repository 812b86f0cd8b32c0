"""What every workload kind's scenario section has in common: the base model each kind's section
(testbed/workloads/<kind>/section.py) extends with its own fields and checks."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from testbed.model.fabric_section import Strict
from testbed.model.limits import WORKLOAD_MAX_HOSTS


class WorkloadSection(Strict):
    """The scenario's `workload` section: these fields for every kind, each kind's own beside them."""

    kind: str
    iterations: int = Field(default=3, ge=1, le=10000)  # measured iterations, after the warm-up ones

    description: ClassVar[str]  # what the kind trains, for the field reference
    # Unmeasured iterations before the measured ones where emulation.warmup_iterations is unset:
    # collectives use each connection once an iteration (its window still opens in the second);
    # long schedules reuse every connection many times, so one is enough.
    default_warmups: ClassVar[int] = 2
    # Whether a job of several on one fabric may have this workload (not when it owns a shared
    # service, nor jobs itself).
    runs_as_job: ClassVar[bool] = True
    # The most GPUs this kind predicts (the fabric section allows more for the kinds that do).
    max_hosts: ClassVar[int] = WORKLOAD_MAX_HOSTS

    def fits(self, hosts: int, whose: str) -> None:
        """ValueError (one sentence naming the field) where this workload cannot run on `hosts` GPUs
        (`whose`: what gives them, e.g. "fabric.hosts (8)"); kinds that override it call this too."""
        if hosts > self.max_hosts:
            raise ValueError(f"workload: kind {self.kind} predicts at most {self.max_hosts:,} GPUs, not "
                             f"{whose}; kinds model and llm reach further")

    def job_refusal(self) -> str | None:
        """Why this workload cannot be one job of several (None: it can)."""
        return None if self.runs_as_job else f"a job's workload cannot be of kind {self.kind}"

    def describe(self) -> str:
        """A few words saying what trains, for `testbed check`."""
        return self.kind

"""INA's scenario section: the aggregation node's rate and slots, the jobs, sharing and loss."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from testbed.model.fabric_section import FabricSection, KindSpec
from testbed.model.limits import INA_MAX_WORKERS, MAX_INA_SLOTS, MAX_LOSS_FRAC, MAX_RATE_GBPS


class InaFabric(FabricSection):
    kind: Literal["ina"]
    # the node's summing rate (unset: line rate)
    aggregation_gbps: float | None = Field(default=None, gt=0, le=MAX_RATE_GBPS)
    slots: int | None = Field(default=None, ge=1, le=MAX_INA_SLOTS)  # aggregation slots (unset: what a window needs)
    workers_per_job: int | None = Field(default=None, ge=1, le=INA_MAX_WORKERS)  # unset: one job of every host
    sharing: Literal["reserved", "shared"] = "reserved"  # SwitchML-reserved or ATP-shared slots
    # Each loss at most a half: the window protocol is simulated packet by packet, and near 1 a
    # chunk waits out timers without end.
    node_drop_frac: float = Field(default=0.0, ge=0, le=MAX_LOSS_FRAC)  # loss injected in the node's pipeline
    link_loss_frac: float = Field(default=0.0, ge=0, le=MAX_LOSS_FRAC)  # loss of INA packets on every link

    spec: ClassVar[KindSpec] = KindSpec("in-network aggregation through a node program", controller_app=None,
                                        aggregation_node=True)

    def loses_packets(self) -> bool:
        return self.link_loss_frac + self.node_drop_frac > 0

    @model_validator(mode="after")
    def _equal_jobs(self) -> "InaFabric":
        per_job = self.workers_per_job or self.hosts
        if self.hosts % per_job:
            raise ValueError(f"workers_per_job ({per_job}) must divide hosts ({self.hosts}): the hosts form equal jobs")
        if per_job > INA_MAX_WORKERS:
            raise ValueError(f"an INA job has at most {INA_MAX_WORKERS} workers (the node's worker bitmap); set "
                             f"workers_per_job to {INA_MAX_WORKERS} or fewer")
        return self

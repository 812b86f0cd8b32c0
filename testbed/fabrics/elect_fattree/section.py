"""Elect-Fattree's scenario section: leaves of GPUs, spines, and the leaves' oversubscription."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from testbed.model.fabric_section import FabricSection, KindSpec
from testbed.model.limits import MAX_HOSTS, MAX_OVERSUBSCRIPTION


class ElectFattreeFabric(FabricSection):
    kind: Literal["elect-fattree"]
    leaf_hosts: int = Field(default=4, ge=1, le=MAX_HOSTS)  # GPUs per leaf switch
    spines: int = Field(default=2, ge=1, le=MAX_HOSTS)  # spine switches, each wired to every leaf
    # a leaf's GPU bandwidth over its uplinks' (1: non-blocking; 4: uplinks carry a quarter)
    oversubscription: float = Field(default=1.0, ge=1.0, le=MAX_OVERSUBSCRIPTION)

    spec: ClassVar[KindSpec] = KindSpec("a two-tier leaf-spine: leaf switches of GPUs, each wired to every spine, "
                                        "flows hashed over the spines (ECMP)",
                                        shaped_into_hosts=True)

    @model_validator(mode="after")
    def _full_leaves(self) -> "ElectFattreeFabric":
        if self.hosts % self.leaf_hosts:
            raise ValueError(f"leaf_hosts ({self.leaf_hosts}) must divide hosts ({self.hosts}): every leaf is full")
        return self

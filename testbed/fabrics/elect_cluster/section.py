"""Elect-Cluster's scenario section: servers of GPUs and their uplinks."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from testbed.model.fabric_section import FabricSection, KindSpec
from testbed.model.limits import MAX_HOSTS, MAX_RATE_GBPS


class ElectClusterFabric(FabricSection):
    kind: Literal["elect-cluster"]
    gpus_per_server: int = Field(default=8, ge=1, le=MAX_HOSTS)  # GPUs on each server's local switch
    server_uplink_gbps: float = Field(default=400.0, gt=0, le=MAX_RATE_GBPS)  # each server's one uplink to the core

    spec: ClassVar[KindSpec] = KindSpec("servers of GPUs on a fast local switch, joined by uplinks", servers=True,
                                        parameter_server=True,
                                        shaped_into_hosts=True)

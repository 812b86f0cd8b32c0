"""PS's scenario section: the CPU machines beside the GPUs."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from testbed.model.fabric_section import FabricSection, KindSpec


class PsFabric(FabricSection):
    kind: Literal["ps"]
    cpu_servers: int = Field(default=0, ge=0, le=1024)  # CPU machines (k) that sum for BytePS

    spec: ClassVar[KindSpec] = KindSpec("GPUs and CPU machines of a parameter server (BytePS) on one switch",
                                        cpu_machines=True, parameter_server=True)

"""Elect-Flat's scenario section: N GPUs on one switch, nothing beyond the common fields."""

from __future__ import annotations

from typing import ClassVar, Literal

from testbed.model.fabric_section import FabricSection, KindSpec


class ElectFlatFabric(FabricSection):
    kind: Literal["elect-flat"]

    spec: ClassVar[KindSpec] = KindSpec("one non-blocking electrical switch", non_blocking=True,
                                        parameter_server=True,
                                        shaped_into_hosts=True)

"""SiP-OCS's scenario section: Q optical circuit switches, their dark time, multi-shot re-planning."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from testbed.model.fabric_section import KindSpec, ReconfigurableSection
from testbed.model.limits import MAX_OPTICAL_PORTS


class SipOcsFabric(ReconfigurableSection):
    kind: Literal["sip-ocs"]
    ocs_switches: int | None = Field(default=None, ge=1, le=MAX_OPTICAL_PORTS)  # Q, the degree D (unset: 16)
    multi_shot: bool = False  # re-plan circuits every estimation period

    spec: ClassVar[KindSpec] = KindSpec("silicon-photonic interfaces into optical circuit switches",
                                        controller_app="controller.optical_app", routed=True, reconfigurable=True)

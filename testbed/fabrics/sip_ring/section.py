"""SiP-Ring's scenario section: W wavelengths of a micro-ring ring, reach, retuning and its period."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from testbed.model.fabric_section import KindSpec, ReconfigurableSection


class SipRingFabric(ReconfigurableSection):
    kind: Literal["sip-ring"]
    wavelengths: int = Field(ge=1)  # W, per fibre segment and direction
    wavelength_gbps: float = Field(default=25.0, gt=0)  # one wavelength's rate: a GPU sends at most W·this
    neighbors: int = Field(default=16, ge=1)  # reach: the farthest GPU a lightpath spans, in hops

    spec: ClassVar[KindSpec] = KindSpec("a silicon-photonic micro-ring ring of wavelength lightpaths",
                                        controller_app="controller.optical_app", routed=True, reconfigurable=True)

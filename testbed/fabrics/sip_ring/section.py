"""SiP-Ring's scenario section: W wavelengths of a micro-ring ring, reach, retuning and its period."""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field

from testbed.model.fabric_section import KindSpec, ReconfigurableSection
from testbed.model.limits import MAX_OPTICAL_PORTS, MAX_RATE_GBPS


class SipRingFabric(ReconfigurableSection):
    kind: Literal["sip-ring"]
    wavelengths: int = Field(ge=1, le=MAX_OPTICAL_PORTS)  # W, per fibre segment and direction
    # one wavelength's rate: a GPU sends at most W·this
    wavelength_gbps: float = Field(default=25.0, gt=0, le=MAX_RATE_GBPS)
    neighbors: int = Field(default=16, ge=1)  # reach: the farthest GPU a lightpath spans, in hops

    spec: ClassVar[KindSpec] = KindSpec("a silicon-photonic micro-ring ring of wavelength lightpaths",
                                        controller_app="controller.optical_app", routed=True, reconfigurable=True)

    def field_warnings(self) -> list[str]:
        carried_gbps = self.wavelengths * self.wavelength_gbps
        if math.isclose(carried_gbps, self.gpu_bandwidth_gbps, rel_tol=1e-9):
            return []
        # The oracle's lightpaths carry wavelength_gbps each, while the emulated host link is B and
        # each wavelength B/W of it: the two would disagree, and sweeping B alone predicts the same.
        return [f"fabric.gpu_bandwidth_gbps ({self.gpu_bandwidth_gbps:g} Gb/s) is not wavelengths × "
                f"wavelength_gbps ({self.wavelengths} × {self.wavelength_gbps:g} = {carried_gbps:g} Gb/s), "
                f"what a sip-ring GPU sends: the prediction uses the wavelengths and the emulation B; set "
                f"gpu_bandwidth_gbps: {carried_gbps:g} or wavelength_gbps: "
                f"{self.gpu_bandwidth_gbps / self.wavelengths:g}"]

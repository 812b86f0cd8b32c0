"""SiP-Ring's scenario section: W wavelengths of a micro-ring ring, reach, retuning and its period."""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from testbed.model.fabric_section import KindSpec, ReconfigurableSection
from testbed.model.limits import MAX_HOSTS, MAX_OPTICAL_PORTS, MAX_RATE_GBPS


class SipRingFabric(ReconfigurableSection):
    kind: Literal["sip-ring"]
    wavelengths: int = Field(ge=1, le=MAX_OPTICAL_PORTS)  # W, per fibre segment and direction
    # One wavelength's rate; unset, B / W: a GPU sends B over its W wavelengths. Set, W times it
    # must be B (a sweep of B alone then keeps every point's rate: refused, not ignored).
    wavelength_gbps: float | None = Field(default=None, gt=0, le=MAX_RATE_GBPS)
    neighbors: int = Field(default=16, ge=1, le=MAX_HOSTS)  # reach: the farthest GPU a lightpath spans, in hops

    spec: ClassVar[KindSpec] = KindSpec("a silicon-photonic micro-ring ring of wavelength lightpaths",
                                        controller_app="controller.optical_app", routed=True, reconfigurable=True)

    @model_validator(mode="after")
    def _wavelengths_carry_b(self) -> "SipRingFabric":
        if self.wavelength_gbps is None:
            return self
        carried_gbps = self.wavelengths * self.wavelength_gbps
        if not math.isclose(carried_gbps, self.gpu_bandwidth_gbps, rel_tol=1e-9):
            whole = self.gpu_bandwidth_gbps / self.wavelength_gbps
            other = f"wavelengths: {round(whole)}" if math.isclose(whole, round(whole), rel_tol=1e-9) and whole >= 1 \
                else f"gpu_bandwidth_gbps: {carried_gbps:g}"
            raise ValueError(
                f"wavelengths × wavelength_gbps ({self.wavelengths} × {self.wavelength_gbps:g} = {carried_gbps:g} "
                f"Gb/s) is not gpu_bandwidth_gbps ({self.gpu_bandwidth_gbps:g} Gb/s), what a sip-ring GPU sends; "
                f"leave wavelength_gbps unset (it is then B / wavelengths) or set {other}")
        return self

    @property
    def wavelength_rate_gbps(self) -> float:
        """One wavelength's rate: wavelength_gbps, or B / W where it is unset."""
        return self.wavelength_gbps or self.gpu_bandwidth_gbps / self.wavelengths

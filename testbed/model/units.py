"""The one place where units are converted: bits, bytes, seconds and the dilation mapping."""

from __future__ import annotations

from dataclasses import dataclass

BITS_PER_BYTE = 8
MS_PER_S = 1e3
US_PER_S = 1e6
BPS_PER_GBPS = 1e9


def gbps_to_bps(rate_gbps: float) -> float:
    return rate_gbps * BPS_PER_GBPS


def us_to_s(duration_us: float) -> float:
    return duration_us / US_PER_S


def ms_to_s(duration_ms: float) -> float:
    return duration_ms / MS_PER_S


def s_to_us(duration_s: float) -> float:
    return duration_s * US_PER_S


def bytes_to_bits(size_bytes: float) -> float:
    return size_bytes * BITS_PER_BYTE


def bits_to_bytes(size_bits: float) -> float:
    return size_bits / BITS_PER_BYTE


def transfer_time_s(size_bytes: float, rate_bps: float) -> float:
    """Time to serialise size_bytes at rate_bps."""
    return size_bytes * BITS_PER_BYTE / rate_bps


@dataclass(frozen=True)
class Dilation:
    """Maps real-world quantities to emulated ones (docs/fidelity.md).

    dilation: emulated seconds per real-world second (s).
    byte_scale: emulated bytes per real-world byte (v).
    """

    dilation: float
    byte_scale: float

    def emulated_rate_bps(self, real_rate_bps: float) -> float:
        return self.byte_scale * real_rate_bps / self.dilation

    def emulated_time_s(self, real_time_s: float) -> float:
        return self.dilation * real_time_s

    def real_time_s(self, emulated_time_s: float) -> float:
        return emulated_time_s / self.dilation

    def emulated_bytes(self, real_bytes: float) -> int:
        return max(1, round(self.byte_scale * real_bytes))

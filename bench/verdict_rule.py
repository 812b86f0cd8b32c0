"""The reproduction page's verdict rule. A claim is reproduced only where our figure, at the
paper's setup, meets the paper's figure within the tolerance written beside it; otherwise it is
not reproduced, with the figure we measured. The paper's figures are written here from the source
documents or from their own formulas, never taken from the oracle under test."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class PaperFigure:
    """What the paper states, as the range of values it allows: every value of ours must lie in
    [low, high] widened by `tolerance` (relative); with `reaches`, the largest must also come
    within `tolerance` of `high` (an "up to" claim)."""

    text: str
    low: float | None
    high: float | None
    tolerance: float
    reaches: bool = False

    def met(self, values: list[float]) -> bool:
        if not values or any(not math.isfinite(v) for v in values):
            return False
        low = -math.inf if self.low is None else self.low * (1 - self.tolerance)
        high = math.inf if self.high is None else self.high * (1 + self.tolerance)
        if not all(low <= v <= high for v in values):
            return False
        return not self.reaches or self.high is None or max(values) >= self.high * (1 - self.tolerance)

    def tolerance_text(self) -> str:
        return f"±{self.tolerance:.0%}"


def verdict(figure: PaperFigure, values: list[float]) -> str:
    return "reproduced" if figure.met(values) else "not reproduced"


def span(values: list[float]) -> str:
    if not values:
        return "not measured"
    low, high = min(values), max(values)
    return f"{low:.3f}" if math.isclose(low, high, rel_tol=5e-4) else f"{low:.2f} to {high:.2f}"


# Formulas of the source documents, evaluated by hand here (seconds, bytes, bits per second).
def ring_allreduce_s(n: int, message_bytes: float, rate_bps: float, alpha_s: float) -> float:
    """2(n−1)·α + 2(n−1)/n·M/B: the ring all-reduce's cost (n GPUs, M bytes, B bits/s)."""
    return 2 * (n - 1) * alpha_s + 2 * (n - 1) / n * message_bytes * 8 / rate_bps


def ina_over_ring_bytes(n: int) -> float:
    """Each GPU sends M to the switch once, against ring's 2(n−1)/n·M: n / (2(n−1))."""
    return n / (2 * (n - 1))


def byteps_over_ring_bytes(n: int, k: int) -> float:
    """BytePS with k CPU machines: 2n(n−1)/(n²+kn−2k)·M a machine, against ring's 2(n−1)/n·M."""
    return (2 * n * (n - 1) / (n * n + k * n - 2 * k)) / (2 * (n - 1) / n)

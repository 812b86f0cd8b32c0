"""float32 → int32 with one shared exponent per chunk (block floating point), and the error bound
that follows. Pure.

Every worker's chunk c is scaled by 2**shift with shift = QUANT_BITS − ceil(log2 n) − E_c, where
E_c is the largest exponent any worker has in that chunk (|x| ≤ 2**E_c), agreed through the node
with a MAX aggregation first. So each |q| ≤ 2**(QUANT_BITS − ceil(log2 n)) and the sum of n stays
inside int32; rounding costs at most 0.5 per worker, so |error| ≤ n · 2**(−shift − 1) per element.
Integer-valued inputs whose scaled value is an integer (shift ≥ 0) are carried exactly."""

from __future__ import annotations

import math

import numpy as np

QUANT_BITS = 30
EXP_MIN, EXP_MAX = -100, 127  # the header's exponent is a signed byte; all-zero chunks use EXP_MIN


class QuantizationError(ValueError):
    """Input the quantizer cannot carry (NaN or infinity)."""


def chunk_starts(elements: int, per_chunk: int) -> np.ndarray:
    return np.arange(0, elements, per_chunk)


def chunk_exponents(data: np.ndarray, per_chunk: int) -> np.ndarray:
    """Per chunk, the smallest E with max|x| ≤ 2**E."""
    if not np.all(np.isfinite(data)):
        raise QuantizationError("INA cannot quantize NaN or infinite gradients")
    if data.size == 0:
        return np.zeros(0, dtype=np.int32)
    peaks = np.maximum.reduceat(np.abs(data.astype(np.float64)), chunk_starts(data.size, per_chunk))
    mantissa, exponent = np.frexp(peaks)  # peak = m·2**e, 0.5 ≤ m < 1
    exponent = exponent - (mantissa == 0.5)  # exact powers of two need one bit less
    exponent = np.where(peaks == 0, EXP_MIN, exponent)
    return np.clip(exponent, EXP_MIN, EXP_MAX).astype(np.int32)


def shifts(exponents: np.ndarray, workers: int) -> np.ndarray:
    return QUANT_BITS - math.ceil(math.log2(workers)) - exponents.astype(np.int64) if workers > 1 else \
        QUANT_BITS - exponents.astype(np.int64)


def _scales(exponents: np.ndarray, workers: int, elements: int, per_chunk: int) -> np.ndarray:
    return np.repeat(np.ldexp(1.0, shifts(exponents, workers)), per_chunk)[:elements]


def quantize(data: np.ndarray, exponents: np.ndarray, workers: int, per_chunk: int) -> np.ndarray:
    scaled = np.rint(data.astype(np.float64) * _scales(exponents, workers, data.size, per_chunk))
    return scaled.astype(np.int32)


def dequantize(sums: np.ndarray, exponents: np.ndarray, workers: int, per_chunk: int) -> np.ndarray:
    return (sums.astype(np.float64) / _scales(exponents, workers, sums.size, per_chunk)).astype(np.float32)


def error_bound(exponents: np.ndarray, workers: int, per_chunk: int, elements: int) -> np.ndarray:
    """Per element: the largest |INA sum − exact sum| quantization allows (before float32 rounding)."""
    return np.repeat(workers * np.ldexp(0.5, -shifts(exponents, workers)), per_chunk)[:elements]

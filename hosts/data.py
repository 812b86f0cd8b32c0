"""Deterministic gradient buffers: integer-valued float32, so any summation order gives exact sums."""

from __future__ import annotations

import hashlib

import numpy as np

ELEMENT_BYTES = 4
VALUE_RANGE = 1000  # |value| < 1000: sums of up to 16,000 ranks stay below 2**24, exact in float32


def gradient(seed: int, iteration: int, rank: int, elements: int) -> np.ndarray:
    rng = np.random.default_rng([seed, iteration, rank])
    return rng.integers(-VALUE_RANGE, VALUE_RANGE, size=elements, dtype=np.int32).astype(np.float32)


def expected_sum(seed: int, iteration: int, ranks: int, elements: int) -> np.ndarray:
    total = np.zeros(elements, dtype=np.float32)
    for rank in range(ranks):
        total += gradient(seed, iteration, rank, elements)
    return total


def digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).data.cast("B")).hexdigest()  # no copy

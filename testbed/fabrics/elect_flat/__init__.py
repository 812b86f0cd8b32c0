"""Elect-Flat: N GPUs on one non-blocking electrical switch."""

"""Limits of the emulated hardware that a scenario is checked against."""

INA_MAX_WORKERS = 64  # the INA node's worker bitmap is 64 bits wide

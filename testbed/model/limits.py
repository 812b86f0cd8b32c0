"""Limits of the emulated hardware that a scenario is checked against."""

INA_MAX_WORKERS = 64  # the INA node's worker bitmap is 64 bits wide
# The largest collective a scenario may name: a terabyte, beyond any model's gradient; larger
# numbers are typos (or a float's overflow) and would only make the planners allocate without end.
MAX_COLLECTIVE_BYTES = 10**12

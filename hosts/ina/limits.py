"""Limits of the INA protocol that the scenario checks as well, without importing scapy."""

MAX_WORKERS = 64  # the worker bitmap is 64 bits wide

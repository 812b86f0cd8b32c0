"""Fabric kinds, one module each: the topology it emulates, the oracle's flow model and DP
all-reduce on it, and its forwarding load (`all_kinds.behaviour(kind)` finds a kind's)."""

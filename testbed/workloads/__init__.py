"""Workload kinds, one folder each (section, schedule, prediction, sizing), and their registry (all_kinds)."""

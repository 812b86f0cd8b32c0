"""The `collective` workload kind: one collective every GPU takes part in, once an iteration."""

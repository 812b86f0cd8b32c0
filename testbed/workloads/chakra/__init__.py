"""The `chakra` workload kind: Chakra execution traces, one per rank."""

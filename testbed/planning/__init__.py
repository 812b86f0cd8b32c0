"""The top of the pure layer: from a scenario to its schedule (workloads, BytePS, the placer's
search) and its prediction."""

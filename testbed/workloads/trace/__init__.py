"""The `trace` workload kind: a JSON schedule or trace file each GPU replays."""

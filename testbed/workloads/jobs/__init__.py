"""The `jobs` workload kind: several jobs on one fabric, each at its own pace."""

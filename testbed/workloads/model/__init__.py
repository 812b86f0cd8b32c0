"""The `model` workload kind: a model SiP-ML's placer splits over the GPUs."""

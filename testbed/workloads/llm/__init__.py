"""The `llm` workload kind: large-model training with tensor, pipeline and data parallelism."""

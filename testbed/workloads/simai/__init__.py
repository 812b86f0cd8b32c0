"""The `simai` workload kind: the text workload files SimAI's AICB writes and ASTRA-sim 1.x reads."""

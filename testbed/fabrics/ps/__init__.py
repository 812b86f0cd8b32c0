"""PS: GPUs and the CPU machines of a parameter server (BytePS) on one switch."""

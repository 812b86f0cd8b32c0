"""BytePS and the classic parameter server: all-reduce summed by services on GPU and CPU machines."""

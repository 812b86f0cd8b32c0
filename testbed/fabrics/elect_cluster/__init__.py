"""Elect-Cluster: servers of GPUs on a fast local switch, joined by shaped uplinks to a core."""

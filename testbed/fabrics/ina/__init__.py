"""INA: in-network aggregation through a node program: its links, its loss and shared-slot models."""

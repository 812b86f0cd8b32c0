"""In-network aggregation: the wire protocol, the aggregation node's pipeline stages, and the worker client."""

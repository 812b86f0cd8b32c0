"""The network's fluid model, below every fabric kind: flows sharing links max-min, the flow model
of one group, relayed paths, the cost of each collective and the event loop of lossy transfers."""

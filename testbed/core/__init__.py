"""The pure core: scenario, units, contracts, schedules, workloads, the oracle's facade and fidelity
rules; it starts no process and touches neither Mininet nor os-ken."""

"""The emulation shims: the live fabric (Mininet, Open vSwitch, the controller process), the runner,
its monitors' probes, side processes, faults and the registry of what a run created."""

"""The emulation shims: preparation, the live fabric (Mininet, Open vSwitch, the controller
process), the runner, side processes, faults and the registry."""

"""The pure core below the fabrics: dilation, fidelity monitors' rules, shaping, faults' timeline,
the watchdog, message matching, calibration and paths; no process, no Mininet, no os-ken."""

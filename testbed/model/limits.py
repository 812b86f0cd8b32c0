"""Limits of the emulated hardware that a scenario is checked against."""

INA_MAX_WORKERS = 64
# The most GPUs a scenario may name: today's largest training clusters (Llama 3's 16,384 H100s).
# Only the kinds that predict at that scale take it (WorkloadSection.max_hosts); the rest stop at
# WORKLOAD_MAX_HOSTS, where their step-by-step predictions stay within seconds.
MAX_HOSTS = 16_384
WORKLOAD_MAX_HOSTS = 1024  # the INA node's worker bitmap is 64 bits wide
# The largest collective a scenario may name: a terabyte, beyond any model's gradient; larger
# numbers are typos (or a float's overflow) and would only make the planners allocate without end.
MAX_COLLECTIVE_BYTES = 10**12
# The fastest link a scenario may name: 10 Pb/s, ten thousand times today's 800 Gb/s NICs (users set
# 10^6 Gb/s for "as if free"); at 10^308 every transfer rounded to no time at all and predicted 0 s.
MAX_RATE_GBPS = 1e7
# The longest per-message latency: a second, beyond any fabric's; it is added to every message.
MAX_LATENCY_US = 1e6
# Optical ports a GPU may have: wavelengths per fibre on SiP-Ring, switches (one port each) on
# SiP-OCS. Co-packaged optics carry 8-64 wavelengths today; 1,024 leaves room and keeps the planners
# quick (a billion wavelengths planned for hours).
MAX_OPTICAL_PORTS = 1024
# Packet loss an INA fabric may inject per link and in the node: a half (a 50%-lossy link already
# triples an all-reduce; at 0.999999 its simulation never finished).
MAX_LOSS_FRAC = 0.5
# The longest step of compute a trace or profile may name: an hour (larger numbers are typos, and
# the simulation cannot time what never ends).
MAX_COMPUTE_US = 3.6e9
# The longest reconfiguration, re-planning period or hold: three hours, past any iteration (a period
# of 10^9 µs is how "never re-plan" is written); at 10^308 µs the controller's timers overflow.
MAX_RECONFIG_US = 1e10
# How much slower than real time a run may go, and how much it may scale bytes: a million (a 1 ms
# iteration then takes 17 minutes of wall time); beyond, nothing a run measures is meaningful.
MAX_DILATION = 1e6
# INA aggregation slots: a million, beyond any switch's SRAM (Tofino holds tens of thousands).
MAX_INA_SLOTS = 1_000_000
# Samples in one iteration: a hundred million, beyond any published global batch (LLMs use ~4 M tokens).
MAX_GLOBAL_BATCH = 100_000_000
# A fat-tree's oversubscription: a thousand to one, beyond any fabric built (4:1 is already steep).
MAX_OVERSUBSCRIPTION = 1000.0
# The longest a run may be asked to take, and the latest a fault may be placed: a week.
MAX_WALL_S = 7 * 24 * 3600.0

# Why each upper bound is where it is, said beside a refusal (by field name).
BOUND_WHY = {
    "hosts": "today's largest training clusters have 16,384 GPUs",
    "gpu_bandwidth_gbps": "10 Pb/s, ten thousand times today's fastest NIC",
    "server_uplink_gbps": "10 Pb/s, ten thousand times today's fastest NIC",
    "wavelength_gbps": "10 Pb/s, ten thousand times today's fastest NIC",
    "aggregation_gbps": "10 Pb/s, ten thousand times today's fastest NIC",
    "latency_us": "a second, beyond any fabric's per-message latency",
    "bytes": "a terabyte, beyond any model's gradient",
    "dp_bucket_bytes": "a terabyte, beyond any model's gradient",
    "wavelengths": "co-packaged optics carry 8-64 wavelengths; 1,024 keeps the planners quick",
    "ocs_switches": "each switch is an optical port of every GPU; 1,024 keeps the planners quick",
    "reconfig_us": "three hours, past any iteration",
    "estimate_period_us": "three hours, past any iteration (a period this long never re-plans)",
    "retune_threshold_us": "three hours, past any iteration",
    "dark_hold_us": "three hours, past any iteration",
    "node_drop_frac": "a 50%-lossy link already triples an all-reduce",
    "link_loss_frac": "a 50%-lossy link already triples an all-reduce",
    "slots": "a million, beyond any switch's memory",
    "global_batch": "a hundred million samples, beyond any published batch",
    "tau_us": "an hour of compute",
    "max_wall_s": "a week",
    "at_ms": "a week",
    "duration_ms": "a week",
    "oversubscription": "a thousand to one, beyond any fabric built",
}

"""Resolves `auto` dilation and byte scale (docs/fidelity.md) from the scenario, its prediction and the calibration."""

from __future__ import annotations

from dataclasses import dataclass, field

from testbed.core.calibration import Calibration
from testbed.model.scenario import Scenario
from testbed.model.units import Dilation, gbps_to_bps

# Per-message cost of the host programs (thread hand-off, numpy reduce) that the shortest timed
# event must dwarf, or the agents' measured ring step where that is longer (slow cores: 0.6-0.7 ms
# on the 2-core machine docs/setup.md describes); and the share of an event that such costs may take.
HOST_OVERHEAD_S = 2e-3
EVENT_TOLERANCE = 0.02
# Wall time each rank adds to the spread of the ranks' start after a barrier: every agent wakes at
# once and needs the CPU to start sending (16 ranks on 2 cores started 5-6.6 ms apart). An
# iteration must be long against that spread, or it runs slow by the spread.
START_SPREAD_PER_RANK_S = 0.35e-3
# Messages below this many emulated bytes are dominated by packet granularity, not by rate.
MIN_MESSAGE_BYTES = 64 * 1024
# A message sent onto a link that idled (each step of a ring collective waits α first) gets its
# first ~50 KB through ahead of the shaped rate (shaping.HTB_IDLE_BURST_BYTES). Measured here
# with ASTRA-sim's 1 MB ring all-reduce on 8 GPUs (14 steps, α a third of each): messages of 66 KB
# ran at 0.78-0.79 of predicted, 98 KB 0.87-0.92, 131 KB 1.01-1.03, 262 KB 1.00, 1 MB 1.00. Where
# α is a real share of a message's time, messages are kept this large.
IDLE_LINK_MESSAGE_BYTES = 256 * 1024
LATENCY_BOUND_SHARE = 0.1  # α at least this share of a message's transfer time: the link idles between messages


def message_floor_bytes(alpha_s: float, message_transfer_s: float, floor_bytes: float = MIN_MESSAGE_BYTES) -> float:
    """The fewest emulated bytes a message may have: more where the link idles α before each one."""
    if message_transfer_s <= 0 or alpha_s >= LATENCY_BOUND_SHARE * message_transfer_s:
        return max(floor_bytes, IDLE_LINK_MESSAGE_BYTES)
    return floor_bytes
# An agent holds about this many copies of its largest buffer (its data, what it receives, numpy's
# temporaries: 599 MB resident for a 188 MB buffer inside the 4 GB VM, where such runs were killed
# for memory), and all ranks' copies may take this share of the machine's memory.
AGENT_BUFFER_COPIES = 4
MEMORY_SHARE = 0.5


@dataclass(frozen=True)
class EmulationPlan:
    """The resolved mapping and what it implies, written to the run directory."""

    dilation: Dilation
    host_rate_bps: float  # emulated rate each GPU's link is shaped to
    capacity_bps: float
    expected_wall_s: float
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, object]:
        return {
            "dilation": self.dilation.dilation,
            "byte_scale": self.dilation.byte_scale,
            "host_rate_bps": self.host_rate_bps,
            "capacity_bps": self.capacity_bps,
            "expected_wall_s": self.expected_wall_s,
            "notes": list(self.notes),
        }


def resolve_emulation(
    scenario: Scenario,
    predicted_iteration_s: float,
    shortest_event_s: float,
    smallest_message_bytes: float,
    concurrent_senders: float,
    calibration: Calibration,
    min_dilation: float = 0.0,
    max_host_rate_bps: float | None = None,
    warmup_iteration_s: float | None = None,
    buffer_bytes: float = 0.0,
    exact_packets: bool = False,
    min_message_bytes: float = MIN_MESSAGE_BYTES,
) -> EmulationPlan:
    """Pick dilation s and byte scale v.

    Constraints: (a) all senders together stay under capacity_fraction of the calibrated capacity;
    (b) the shortest timed event, dilated, is long enough that timer error and host overhead stay
    under EVENT_TOLERANCE of it, and the iteration long enough against the ranks' start spread;
    (c) the smallest message stays above `min_message_bytes`; and the iterations fit in max_wall_s
    where (a)-(c) allow. Within those, the smallest s wins: shortest run. An automatic v is then
    lowered where the ranks' buffers (`buffer_bytes` emulated bytes, all ranks together) would not
    fit in the calibrated memory: the run takes as long, at a lower wall rate. With
    `exact_packets` (loss injected per packet) an automatic v is 1: each emulated packet is a real
    one, so a run loses as many packets as the fabric it emulates.
    """
    emulation = scenario.emulation
    rate_bps = gbps_to_bps(scenario.fabric.gpu_bandwidth_gbps)
    iterations = scenario.workload.iterations
    usable_bps = emulation.capacity_fraction * calibration.usable_capacity_bps
    # Another component (the INA node's program) may keep up with less than the datapath.
    max_host_rate_bps = min(usable_bps / max(1, concurrent_senders), max_host_rate_bps or float("inf"))
    notes: list[str] = []
    if not calibration.measured:
        notes.append("no calibration on this machine; run `testbed doctor --calibrate` for accurate auto values")

    event_floor_s = max(calibration.timer_error_s, HOST_OVERHEAD_S, calibration.agent_step_s or 0.0) / EVENT_TOLERANCE
    s_for_timers = event_floor_s / shortest_event_s if shortest_event_s > 0 else 0.0
    spread_s = START_SPREAD_PER_RANK_S * scenario.fabric.hosts
    s_for_start = spread_s / EVENT_TOLERANCE / predicted_iteration_s if predicted_iteration_s > 0 else 0.0
    s_for_timers = max(s_for_timers, s_for_start, min_dilation)  # e.g. dark times the controller must time

    fixed_s = None if emulation.dilation == "auto" else float(emulation.dilation)
    fixed_v = None if emulation.byte_scale == "auto" else float(emulation.byte_scale)
    if exact_packets and fixed_v is None:
        fixed_v = 1.0
    elif exact_packets and fixed_v is not None and fixed_v != 1.0:
        notes.append(f"loss is injected per emulated packet, each {1 / fixed_v:.3g} real ones at byte scale "
                     f"{fixed_v:.3g}: the run loses packets as a coarser fabric would (byte_scale: auto keeps 1)")
    if fixed_s is not None and fixed_v is not None:
        s, v = fixed_s, fixed_v
    elif fixed_s is not None:
        s = fixed_s
        v = s * max_host_rate_bps / rate_bps
    else:
        # v = s·r/B at the largest allowed per-host rate r; raise s until messages are large enough.
        s_for_bytes = min_message_bytes * rate_bps / (max_host_rate_bps * smallest_message_bytes)
        if fixed_v is not None:
            s = max(fixed_v * rate_bps / max_host_rate_bps, s_for_timers)
            v = fixed_v
        else:
            s = max(s_for_timers, s_for_bytes)
            v = s * max_host_rate_bps / rate_bps
    fits = MEMORY_SHARE * (calibration.memory_bytes or 0.0) / (AGENT_BUFFER_COPIES * buffer_bytes) \
        if calibration.memory_bytes and buffer_bytes > 0 else float("inf")
    if fixed_v is None and v > fits:
        v = fits
        notes.append(f"byte scale lowered to {v:.3g} so the ranks' buffers fit in this machine's memory")
    dilation = Dilation(dilation=s, byte_scale=v)
    host_rate_bps = dilation.emulated_rate_bps(rate_bps)
    # Warm-up rounds skip compute (the agents only warm connections and windows), so they are shorter.
    warmup_s = predicted_iteration_s if warmup_iteration_s is None else warmup_iteration_s
    expected_wall_s = dilation.emulated_time_s(iterations * predicted_iteration_s + scenario.warmups() * warmup_s)
    if host_rate_bps * concurrent_senders > calibration.usable_capacity_bps:
        notes.append(
            f"emulated traffic {host_rate_bps * concurrent_senders / 1e6:.0f} Mb/s exceeds the calibrated "
            f"capacity {calibration.usable_capacity_bps / 1e6:.0f} Mb/s; expect an unfaithful run (use dilation: auto)"
        )
    if s < s_for_timers:
        notes.append("dilation is below what this machine's timers need for the shortest event")
    if expected_wall_s > emulation.max_wall_s:
        notes.append(
            f"expected wall time {expected_wall_s:.0f} s exceeds emulation.max_wall_s {emulation.max_wall_s:.0f} s"
        )
    return EmulationPlan(
        dilation=dilation,
        host_rate_bps=host_rate_bps,
        capacity_bps=calibration.usable_capacity_bps,
        expected_wall_s=expected_wall_s,
        notes=tuple(notes),
    )

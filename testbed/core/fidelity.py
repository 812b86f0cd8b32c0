"""Fidelity monitors (docs/fidelity.md): did the machine deliver what the emulation asked of it?"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from testbed.core.dilation import MIN_MESSAGE_BYTES
from testbed.core.shaping import HTB_IDLE_BURST_BYTES
from testbed.model.units import bytes_to_bits

RATE_LOW, RATE_HIGH = 0.85, 1.10
CPU_SATURATED = 0.97
TIMER_TOLERANCE = 0.05
DROP_TOLERANCE = 1e-4
COMPUTE_TOLERANCE = 0.02


@dataclass(frozen=True)
class Monitor:
    name: str
    value: float | None
    ok: bool
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, object]:
        return {"value": self.value, "ok": self.ok, "detail": self.detail, "fix": self.fix}


def link_rate_monitor(step_rates_bps: list[float], host_rate_bps: float, loss_injected: bool = False) -> Monitor:
    if not step_rates_bps:
        return Monitor("link_rate", None, True, "no transfers to judge")
    ratio = statistics.median(step_rates_bps) / host_rate_bps
    if loss_injected:  # recovery from the scenario's own loss slows transfers by design
        return Monitor("link_rate", ratio, True, f"busy links achieved {ratio:.2f} of the configured rate "
                       f"(median over steps); not judged, the scenario injects loss")
    ok = RATE_LOW <= ratio <= RATE_HIGH
    return Monitor("link_rate", ratio, ok,
                   f"busy links achieved {ratio:.2f} of the configured rate (median over steps)",
                   "" if ok else "raise the dilation (or lower byte_scale) so the machine can keep up")


JUDGED_BURSTS = 10  # messages this many idle bursts long are judged; the burst varies by ±25 KB


def transfer_rates_bps(events: list[dict[str, Any]], dilation: float, alpha_wall_s: float,
                       host_rate_bps: float) -> list[tuple[int, int, str, float]]:
    """Rates of a schedule's point-to-point messages whose receiver was already waiting when the
    message could start moving (send posted, alpha passed): timed from then to the receive's end.
    A message its receiver asked for later moved partly or wholly into socket buffers unseen, so
    it says nothing of the link and is left out. Returns (sender, receiver, tag, bits/s) of each."""
    sends = {(e["host"], e["peer"], e["tag"], e["iteration"]): e for e in events
             if e.get("kind") == "send" and "tag" in e}
    burst = HTB_IDLE_BURST_BYTES
    rates = []
    for recv in events:
        if recv.get("kind") != "recv" or "tag" not in recv:
            continue
        send = sends.get((recv["peer"], recv["host"], recv["tag"], recv["iteration"]))
        if send is None:
            continue
        start = send["t_emulated_s"] + alpha_wall_s
        if recv["t_emulated_s"] > start:
            continue  # the receiver came late: part of the message may already have been buffered
        end = recv["t_emulated_s"] + recv["duration_s"] * dilation
        size = recv["emulated_bytes"]
        if end > start and size >= JUDGED_BURSTS * burst:  # smaller ones: the burst's spread dominates
            # an idle link lets its first ~50 KB through at once: the rest moves at the shaped rate
            rates.append((recv["peer"], recv["host"], recv["tag"], bytes_to_bits(size - burst) / (end - start)))
    return rates


def timer_monitor(overshoot_mean_s: float, overshoot_p99_s: float, shortest_event_emulated_s: float) -> Monitor:
    """Mean overshoot against the shortest event: along a chain of events the overshoots add up,
    so their mean, not a rare tail, is what distorts an iteration's time."""
    if shortest_event_emulated_s <= 0:
        return Monitor("timer", None, True, "no timed events")
    frac = overshoot_mean_s / shortest_event_emulated_s
    tail = overshoot_p99_s / shortest_event_emulated_s
    ok = frac <= TIMER_TOLERANCE
    return Monitor("timer", frac, ok,
                   f"timed waits overshot by {frac:.1%} of the shortest timed event on average ({tail:.1%} at p99)",
                   "" if ok else "raise the dilation so timed events are longer, or run fewer hosts")


def compute_timing_monitor(overshoot_s: float | None, iterations_wall_s: float, overshoot_of_plan_frac: float,
                           step_mean_frac: float | None, step_p99_frac: float | None) -> Monitor:
    """How much the dilated compute steps' lateness, in all on the worst host, could have lengthened
    the iterations (schedules with compute steps only). A 1 ms step preempted for 0.3 ms is 30% off
    but adds 0.3 ms to an iteration, so the total is judged, and against the iterations' wall time:
    one 20 ms preemption is 2% of 1 s of compute but 0.1% of a 20 s iteration that waits on messages."""
    if overshoot_s is None:
        return Monitor("compute_timing", None, True, "no compute steps")
    frac = overshoot_s / iterations_wall_s if iterations_wall_s > 0 else overshoot_of_plan_frac
    ok = frac <= COMPUTE_TOLERANCE
    return Monitor("compute_timing", frac, ok,
                   f"compute steps ran {overshoot_s * 1e3:.1f} ms late in all on the worst host, "
                   f"{frac:.2%} of the iterations' wall time ({overshoot_of_plan_frac:.2%} of its planned compute; "
                   f"per step: {step_mean_frac or 0:.2%} on average, {step_p99_frac or 0:.1%} at p99)",
                   "" if ok else "raise the dilation so compute steps are longer than the host's timer error")


def cpu_monitor(busy_frac: float | None) -> Monitor:
    if busy_frac is None:
        return Monitor("cpu", None, True, "not measured")
    ok = busy_frac < CPU_SATURATED
    return Monitor("cpu", busy_frac, ok, f"CPU busy {busy_frac:.0%} during the iterations",
                   "" if ok else "fewer hosts or a larger dilation; the host programs were starved")


# Of all cores' time during an iteration. bench/steal.py (quickstart on a shared 2-core host):
# iterations with 5-20% steal ran 1.01-1.07x the oracle, 20-30% up to 1.13x, over 30% 1.2-1.6x,
# at the auto dilation and at twice it alike: pauses of the cores, not the load, cost the time.
STEAL_TOLERANCE = 0.10


def steal_monitor(per_iteration: list[float | None]) -> Monitor:
    """Iterations during which the hypervisor took more than STEAL_TOLERANCE of this machine's CPU
    time (steal, counted by the kernel): on a shared host a virtual machine's cores are taken away for
    milliseconds at a time, its switches stop forwarding meanwhile, and queues overflow that the
    calibration never saw fill."""
    measured = [f for f in per_iteration if f is not None]
    if not measured:
        return Monitor("steal", None, True, "not measured")
    worst = max(measured)
    disturbed = [i for i, f in enumerate(per_iteration) if f is not None and f > STEAL_TOLERANCE]
    ok = not disturbed
    where = f"; over {STEAL_TOLERANCE:.0%} in iteration{'s' if len(disturbed) > 1 else ''} " \
            f"{', '.join(map(str, disturbed))}" if disturbed else ""
    return Monitor("steal", worst, ok,
                   f"the hypervisor took up to {worst:.1%} of this machine's CPU time during an iteration{where}",
                   "" if ok else "this virtual machine's host was busy with others: those iterations are longer "
                                 "than the fabric makes them (a larger dilation did not help); run again when "
                                 "the host is quieter")


def message_size_monitor(smallest_emulated_bytes: int, floor_bytes: float = MIN_MESSAGE_BYTES) -> Monitor:
    ok = smallest_emulated_bytes >= floor_bytes
    return Monitor("message_size", float(smallest_emulated_bytes), ok,
                   f"smallest emulated message {smallest_emulated_bytes} B (floor {floor_bytes:.0f} B)",
                   "" if ok else "raise byte_scale (or use auto) so messages span many packets")


def capacity_monitor(offered_bps: float, capacity_bps: float, calibrated: bool) -> Monitor:
    frac = offered_bps / capacity_bps
    ok = frac <= 1.0
    source = "calibrated" if calibrated else "default (uncalibrated)"
    return Monitor("capacity", frac, ok,
                   f"offered load is {frac:.0%} of the {source} forwarding capacity",
                   "" if ok else "use dilation: auto, or a larger dilation")


def drop_monitor(counters: dict[str, int] | None) -> Monitor:
    """Datapath drops during the iterations. TCP recovers a rare loss within a round trip, so up to
    DROP_TOLERANCE of the packets passes; more means the datapath was overloaded."""
    if counters is None:
        return Monitor("drops", None, True, "not measured")
    frac = counters["dropped"] / max(1, counters["packets"])
    ok = frac <= DROP_TOLERANCE
    return Monitor("drops", frac, ok,
                   f"{counters['dropped']} of {counters['packets']} packets dropped by the switch datapath "
                   f"({frac:.3%}; the fabric intends none)",
                   "" if ok else "the datapath was overloaded or its ports' socket buffers were too small: "
                                 "raise the dilation, or run scripts/setup.sh, which raises them")


TIMEOUT_TOLERANCE = 0.05  # of an iteration's wall time


def retransmission_monitor(timeouts: list[int], retransmits: list[int], iteration_wall_s: list[float],
                           loss_injected: bool, rto_min_s: float) -> Monitor:
    """TCP retransmission timeouts in each measured iteration, from the hosts' own counters. A fast
    retransmit is TCP's ordinary answer to a full queue, as on real links; a timeout means a packet
    the machine dropped (a queue, the datapath under load) stalled a connection for at least
    `rto_min_s` of wall time (the routes' shortest timeout), which no dilation hides. An iteration
    whose timeouts can cost more than TIMEOUT_TOLERANCE of its wall time is not faithful."""
    total = sum(timeouts)
    segments = f"{sum(retransmits)} segments retransmitted"
    if loss_injected:
        return Monitor("retransmissions", float(total), True,
                       f"{total} retransmission timeouts, {segments}; loss is injected by the scenario")
    disturbed = [i for i, (n, wall) in enumerate(zip(timeouts, iteration_wall_s))
                 if n * rto_min_s > TIMEOUT_TOLERANCE * wall]
    ok = not disturbed
    where = f"; they cost iteration{'s' if len(disturbed) > 1 else ''} {', '.join(map(str, disturbed))} " \
            f"more than {TIMEOUT_TOLERANCE:.0%} of its time" if disturbed else ""
    return Monitor("retransmissions", float(total), ok,
                   f"{total} TCP retransmission timeouts, {segments} (the fabric intends no timeout){where}",
                   "" if ok else "the machine dropped packets and those iterations waited out retransmission "
                                 "timeouts: run on an idle machine, or lower emulation.capacity_fraction")


# A TCP timer waits at least 200 ms of wall time: a retransmission timeout, or the loss probe of a
# lone tail segment (2·SRTT + 200 ms, which TCPTimeouts does not count). A collective step that
# outlasts its like steps by this much waited for one; CPU scheduling alone delays less.
STALL_WALL_S = 0.15


def stalls_per_iteration(events: list[dict[str, Any]], dilation: float, iteration_wall_s: list[float]) -> list[int]:
    """Collective steps (ring steps' receive events) per measured iteration that took longer than
    the median of the steps of the same collective, phase and size by STALL_WALL_S of wall time and
    by TIMEOUT_TOLERANCE of their iteration's (less cannot move an iteration's time much)."""
    iterations = len(iteration_wall_s)
    steps = [e for e in events if e.get("kind") == "recv" and "phase" in e and 0 <= e.get("iteration", -1)]
    like: dict[tuple[Any, ...], list[float]] = {}
    for e in steps:
        like.setdefault((e.get("step"), e["phase"], e.get("emulated_bytes")), []).append(e["duration_s"])
    medians = {key: statistics.median(durations) for key, durations in like.items()}
    counts = [0] * iterations
    for e in steps:
        excess_wall_s = (e["duration_s"] - medians[(e.get("step"), e["phase"], e.get("emulated_bytes"))]) * dilation
        it = e["iteration"]
        if it < iterations and excess_wall_s > max(STALL_WALL_S, TIMEOUT_TOLERANCE * iteration_wall_s[it]):
            counts[it] += 1
    return counts


def stall_monitor(stalls: list[int] | None, loss_injected: bool) -> Monitor:
    """Iterations in which a collective step waited for a TCP timer (stalls_per_iteration); None
    where steps also wait for peers still computing (schedules) or queue behind earlier chunks
    (BytePS, INA)."""
    if stalls is None:
        return Monitor("stalls", None, True, "not judged: these steps also wait for peers' compute or queue "
                       "behind earlier chunks")
    total = sum(stalls)
    if loss_injected:
        return Monitor("stalls", float(total), True, f"{total} collective steps waited for a TCP timer; "
                       f"loss is injected by the scenario")
    stalled = [i for i, n in enumerate(stalls) if n]
    ok = not stalled
    where = f" in iteration{'s' if len(stalled) > 1 else ''} {', '.join(map(str, stalled))}" if stalled else ""
    return Monitor("stalls", float(total), ok,
                   f"{total} collective steps outlasted their like by over {STALL_WALL_S * 1e3:.0f} ms of wall "
                   f"time{where} (a TCP timer: a lost tail segment waits a loss probe or a retransmission "
                   f"timeout of 200 ms)",
                   "" if ok else "the machine lost a packet; those iterations are longer than the fabric "
                                 "makes them: run on an idle machine, or lower emulation.capacity_fraction")


INA_RETRANSMIT_TOLERANCE = 0.01


def ina_loss_monitor(ina: dict[str, Any] | None, loss_injected: bool) -> Monitor:
    """INA packets lost without the scenario asking for it (each costs a retransmission timeout):
    the node program or a queue could not keep up."""
    node = (ina or {}).get("node")
    if ina is None or node is None:
        return Monitor("ina_loss", None, False, "the aggregation node wrote no counters",
                       "see ina_node.log in the run directory")
    received = max(1, node["counters"].get("received", 0))
    retransmits = ina["workers"].get("retransmits", 0)
    frac = retransmits / received
    if loss_injected:
        return Monitor("ina_loss", frac, True, f"{retransmits} retransmissions for {received} packets at the node "
                       f"({frac:.2%}); loss is injected by the scenario")
    ok = frac <= INA_RETRANSMIT_TOLERANCE
    return Monitor("ina_loss", frac, ok, f"{retransmits} retransmissions for {received} packets at the node "
                   f"({frac:.2%}; the fabric intends none)",
                   "" if ok else "the aggregation node or a queue dropped packets: raise the dilation")


def verdict(monitors: list[Monitor]) -> dict[str, object]:
    return {
        "ok": all(m.ok for m in monitors),
        "monitors": {m.name: m.to_json() for m in monitors},
    }


DARK_TOLERANCE = 0.10
# What scripts/setup.sh lowers max-idle to, and so how often the switches' counters are refreshed.
SETUP_COUNTER_REFRESH_MS = 10
# A controller that re-plans from those counters needs this many refreshes in one estimation
# period: with four (a 100 µs period at dilation 400) a placed Transformer on 16 SiP-Ring GPUs
# retuned 69-152 times an iteration against 22 predicted, and ran 1.01-1.09 of its prediction;
# with ten (dilation 1,000) it retuned 21-22 times and ran 1.000-1.001.
COUNTER_REFRESHES_PER_PERIOD = 10


def dark_time_monitor(measured_s: list[float], configured_s: list[float], why_longest: str = "") -> Monitor:
    """Reconfigurations: how long the changed links were dark, against the configured dark time.
    `why_longest` says what made the longest one long (late restore or slow hosts), for the detail."""
    if not measured_s:
        return Monitor("dark_time", None, True, "no reconfigurations during the run")
    ratio = sum(measured_s) / sum(configured_s) if sum(configured_s) > 0 else 1.0
    each = [m / c for m, c in zip(measured_s, configured_s) if c > 0] or [1.0]
    ok = abs(ratio - 1) <= DARK_TOLERANCE
    return Monitor("dark_time", ratio, ok,
                   f"{len(measured_s)} reconfigurations were dark {ratio:.2f}× the configured time on average "
                   f"(each {min(each):.2f}-{max(each):.2f}×{'; ' + why_longest if why_longest else ''})",
                   "" if ok else "raise the dilation so the hosts' switch-over time is small against the dark time")


def why_dark_ran_long(event: dict[str, Any]) -> str:
    """What the controller recorded of one reconfiguration's timing, in wall-clock milliseconds: how
    late the restore began against its agreed instant (a busy CPU, or switches slow to confirm a
    re-pointed port) and how long the slowest host took to apply each phase."""
    parts = []
    if "restore_late_s" in event:
        parts.append(f"restore began {event['restore_late_s'] * 1e3:.2f} ms late")
    for phase in ("dark", "restore"):
        slowest = event.get(f"{phase}_slowest")
        if slowest:
            parts.append(f"host {slowest[0]} applied the {phase} in {slowest[1] * 1e3:.2f} ms")
    return f"the longest (reconfiguration {event.get('id')}): " + ", ".join(parts) if parts else ""

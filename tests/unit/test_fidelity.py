"""Fidelity monitors on hand-made inputs: the link-rate view of a schedule (each message timed from when
it could move) and the retransmission monitor."""

from __future__ import annotations

from testbed.core.fidelity import transfer_rates_bps


def event(kind, host, peer, t, duration_wall, tag="a", size=1_000_000, dilation=10.0):
    return {"kind": kind, "host": host, "peer": peer, "tag": tag, "iteration": 0, "t_emulated_s": t,
            "duration_s": duration_wall / dilation, "emulated_bytes": size}


def test_waiting_for_the_sender_is_not_counted_and_late_receivers_are_left_out():
    rate = 8e6  # 1 MB takes 1 s
    events = [event("send", 0, 1, 5.0, 0.0), event("recv", 1, 0, 2.0, 4.0),  # receiver waited 3 s for the send
              event("send", 0, 2, 1.0, 0.0, tag="b"), event("recv", 2, 0, 1.5, 0.6, tag="b")]  # asked 0.5 s later
    rates = transfer_rates_bps(events, dilation=10.0, alpha_wall_s=0.0, host_rate_bps=rate)
    assert len(rates) == 1 and rates[0][:2] == (0, 1)
    assert rates[0][2] == "a" and 0.94 * 8e6 < rates[0][3] < 8e6  # less what the shaper lets through at once after idle


def test_retransmission_timeouts_that_can_cost_over_5_percent_of_an_iteration_are_named():
    from testbed.core.fidelity import retransmission_monitor

    # Each timeout costs at least 200 ms: 1 of them is 2.5% of an 8 s iteration, 3 are 7.5%.
    fast_only = retransmission_monitor([0, 0, 0], [4, 0, 7], [8.0, 8.0, 8.0], False, 0.2)
    assert fast_only.ok and "11 segments retransmitted" in fast_only.detail  # TCP's answer to full queues
    assert retransmission_monitor([1, 0], [9, 0], [8.0, 8.0], False, 0.2).ok
    disturbed = retransmission_monitor([3, 0, 4], [30, 0, 50], [8.0, 8.0, 8.0], False, 0.2)
    assert not disturbed.ok and disturbed.value == 7.0
    assert "iterations 0, 2 more than 5%" in disturbed.detail and "idle machine" in disturbed.fix
    assert retransmission_monitor([5, 2], [9, 9], [1.0, 1.0], True, 0.2).ok  # the scenario's own loss
    # On routes whose shortest timeout is 2 s, one timeout is 25% of an 8 s iteration.
    assert not retransmission_monitor([1, 0], [9, 0], [8.0, 8.0], False, 2.0).ok


def test_a_timeout_costs_the_routes_shortest_retransmission_timeout():
    from testbed.fabrics.timing import route_rto_min_s
    from testbed.planning.scenario_file import parse_scenario

    def fabric(section):
        return parse_scenario({"name": "t", "fabric": {"gpu_bandwidth_gbps": 100, **section},
                               "workload": {"kind": "collective", "collective": "allreduce", "bytes": 1000}},
                              "t").fabric

    # Switched fabrics keep Linux's 200 ms while their hosts' queues drain sooner, else twice the
    # longest queue: 0.735 s of wall time -> 1.47 s.
    flat = fabric({"kind": "elect-flat", "hosts": 4})
    assert route_rto_min_s(flat, 1000.0) == 0.2
    assert route_rto_min_s(flat, 1000.0, 0.09) == 0.2
    assert route_rto_min_s(flat, 1000.0, 0.735) == 1.47
    # INA's hosts reach the node over routes of its own, left at Linux's.
    assert route_rto_min_s(fabric({"kind": "ina", "hosts": 4}), 1000.0, 0.735) == 0.2
    # SiP-Ring's routes: 2 s, or twice the dilated dark time when longer: 25 µs × 1,000 = 25 ms -> 2 s;
    # 25 µs × 100,000 = 2.5 s -> 5 s.
    ring = fabric({"kind": "sip-ring", "hosts": 4, "reconfig_us": 25, "wavelengths": 4, "wavelength_gbps": 25})
    assert route_rto_min_s(ring, 1000.0) == 2.0
    assert route_rto_min_s(ring, 100_000.0) == 5.0
    # SiP-OCS at its default 10 ms dark time and dilation 200: 2 s × 2 = 4 s.
    assert route_rto_min_s(fabric({"kind": "sip-ocs", "hosts": 4}), 200.0) == 4.0


def test_compute_timing_is_judged_by_the_time_compute_added_to_the_iterations():
    from hosts.timing import compute_timing
    from testbed.core.fidelity import compute_timing_monitor

    # 99 steps of 10 ms on time and one 1 ms step preempted for 0.3 ms: 0.3 ms beyond 991 ms planned
    # (0.03%), although the per-step ratios average 0.3% and one step is 30% off.
    waits = [(0.010, 0.0)] * 99 + [(0.001, 0.0003)]
    timing = compute_timing(waits)
    assert timing["steps"] == 100
    assert abs(timing["overshoot_s"] - 0.0003) < 1e-12 and abs(timing["planned_s"] - 0.991) < 1e-12
    assert abs(timing["overshoot_frac"] - 0.0003 / 0.991) < 1e-12
    assert abs(timing["error_mean_frac"] - 0.003) < 1e-12
    # The iterations took 1.0 s of wall time: 0.3 ms is 0.03% of it.
    monitor = compute_timing_monitor(timing["overshoot_s"], 1.0, timing["overshoot_frac"],
                                     timing["error_mean_frac"], timing["error_p99_frac"])
    assert monitor.ok and abs(monitor.value - 0.0003) < 1e-12 and "0.3 ms late" in monitor.detail
    # Every 4 ms step 0.1 ms late: 1 ms beyond 40 ms of compute. In a 41 ms iteration that is all
    # compute, 2.4%, past the 2% tolerance; in a 1 s iteration that waits on messages, 0.1%.
    late = compute_timing([(0.004, 0.0001)] * 10)
    assert abs(late["overshoot_frac"] - 0.025) < 1e-12
    args = (late["overshoot_frac"], late["error_mean_frac"], late["error_p99_frac"])
    assert not compute_timing_monitor(late["overshoot_s"], 0.041, *args).ok
    assert compute_timing_monitor(late["overshoot_s"], 1.0, *args).ok
    assert compute_timing([])["overshoot_frac"] == 0.0


def test_a_collective_step_that_waited_for_a_tcp_timer_is_named():
    """Ring steps of 100 ms of wall time (10 ms real at dilation 10) in iterations of 0.8 s; one
    took 330 ms: 230 ms over its like, a lost tail segment's loss probe (2·SRTT + 200 ms). 50 ms
    over is scheduling, not a timer; and in a 10 s iteration 230 ms is under 5% of it."""
    from testbed.core.fidelity import stall_monitor, stalls_per_iteration

    def step(iteration, index, duration_wall_s, phase="all-gather"):
        return {"kind": "recv", "phase": phase, "step": "allreduce", "index": index, "iteration": iteration,
                "emulated_bytes": 1000, "duration_s": duration_wall_s / 10, "host": 0}

    events = [step(0, i, 0.1) for i in range(5)] + [step(0, 5, 0.33), step(1, 0, 0.15)] + \
        [step(1, i, 0.1) for i in range(1, 6)] + [step(-1, 0, 5.0)]  # a warm-up round is not judged
    stalls = stalls_per_iteration(events, dilation=10.0, iteration_wall_s=[0.8, 0.8])
    assert stalls == [1, 0]
    assert stalls_per_iteration(events, dilation=10.0, iteration_wall_s=[10.0, 10.0]) == [0, 0]
    monitor = stall_monitor(stalls, loss_injected=False)
    assert not monitor.ok and "iteration 0" in monitor.detail
    assert stall_monitor(stalls, loss_injected=True).ok


def test_dark_time_is_judged_on_average_and_names_what_made_the_longest_long():
    from testbed.core.fidelity import dark_time_monitor, why_dark_ran_long

    # Three 10 ms dark times, one 3.3 ms long: on average (10 + 10 + 13.3) / 30 = 1.11, outside ±10%.
    late = {"id": 2, "restore_late_s": 3.2e-3, "dark_slowest": [1, 0.4e-3], "restore_slowest": [3, 0.5e-3]}
    why = why_dark_ran_long(late)
    assert why == ("the longest (reconfiguration 2): restore began 3.20 ms late, host 1 applied the dark in "
                   "0.40 ms, host 3 applied the restore in 0.50 ms")
    flagged = dark_time_monitor([10e-3, 10e-3, 13.3e-3], [10e-3] * 3, why)
    assert not flagged.ok and abs(flagged.value - 1.11) < 1e-9
    assert "1.00-1.33×; the longest (reconfiguration 2): restore began 3.20 ms late" in flagged.detail
    assert dark_time_monitor([10e-3, 10.5e-3, 11e-3], [10e-3] * 3).ok
    assert why_dark_ran_long({"id": 1}) == ""

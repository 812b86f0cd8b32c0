"""The link-rate monitor's view of a schedule: each message timed from when it could move."""

from __future__ import annotations

from testbed.fidelity import transfer_rates_bps


def event(kind, host, peer, t, duration_wall, tag="a", size=1_000_000, dilation=10.0):
    return {"kind": kind, "host": host, "peer": peer, "tag": tag, "iteration": 0, "t_emulated_s": t,
            "duration_s": duration_wall / dilation, "emulated_bytes": size}


def test_waiting_for_the_sender_is_not_counted_and_buffered_messages_are_left_out():
    rate = 8e6  # 1 MB takes 1 s
    events = [event("send", 0, 1, 5.0, 0.0), event("recv", 1, 0, 2.0, 4.0),  # receiver waited 3 s for the send
              event("send", 0, 2, 1.0, 0.0, tag="b"), event("recv", 2, 0, 9.0, 0.01, tag="b")]  # asked 8 s later
    rates = transfer_rates_bps(events, dilation=10.0, alpha_wall_s=0.0, host_rate_bps=rate)
    assert rates == [(0, 1, 8e6)]

"""The INA window protocol under loss (testbed/fabrics/ina/loss.py), against timelines worked out by
hand and the closed form of a lossless pass."""

from __future__ import annotations

import pytest

from testbed.fabrics.ina.loss import UPLINK, InaProtocol, lossy_allreduce_s, simulate_pass


def never(point, worker, chunk, attempt):
    return False


def losing(*which):
    """Loses exactly the packets named (point, worker, chunk, attempt)."""
    return lambda point, worker, chunk, attempt: (point, worker, chunk, attempt) in which


def protocol(workers=1, window=1, rto=10.0):
    return InaProtocol(workers=workers, window=window, frame_s=1.0, min_rto_s=rto, initial_rto_s=rto)


def test_a_lossless_pass_streams_one_frame_per_slot():
    # A window wider than the round trip (2 frames) keeps the link busy: C frames out, the last
    # result one frame later.
    assert simulate_pass(protocol(workers=4, window=4), 100, never).time_s == pytest.approx(101.0)
    # A window of one waits out each round trip: 2 frames per chunk.
    assert simulate_pass(protocol(window=1), 3, never).time_s == pytest.approx(6.0)


def test_a_lost_chunk_holds_the_window_for_its_timeout():
    # Chunk 0 out at 0, result at 2; chunk 1 out at 2 (deadline 12) and lost; resent at 12, its
    # result at 14; chunk 2 out at 14, result at 16. Lossless: 6.
    times = simulate_pass(protocol(window=1), 3, losing((UPLINK, 0, 1, 0)))
    assert times.time_s == pytest.approx(16.0) and times.retransmits == 1


def test_every_worker_waits_for_the_one_whose_contribution_was_lost():
    # Two workers, window 2: chunk 0 of worker 1 is lost, chunk 1 completes at 2 (results at 3).
    # Both time chunk 0 out at 10 and resend it; worker 0's copy is a duplicate (dropped), worker
    # 1's completes the chunk at 11, whose results arrive at 12.
    times = simulate_pass(protocol(workers=2, window=2), 2, losing((UPLINK, 1, 0, 0)))
    assert times.finish_s == pytest.approx((12.0, 12.0)) and times.retransmits == 2


def test_a_sum_a_retransmission_completed_is_no_round_trip_sample():
    """Two workers, window 1, worker 1's chunk 0 lost: worker 0 is the one that waits without
    retransmitting when its own timeout is later. With timeouts of 10 and 4 (worker 0, worker 1),
    worker 1 resends at 4, the sum completes at 5 and both results arrive at 6: worker 0 sent
    once yet waited 6 for another's loss, so it takes no sample; its chunk 1 (out at 6, back at
    8) is its first: srtt 2, rttvar 1."""
    from hosts.ina.client import RetransmitTimer

    timers = [RetransmitTimer(10.0, 1.0), RetransmitTimer(4.0, 1.0)]
    simulate_pass(protocol(workers=2, window=1), 2, losing((UPLINK, 1, 0, 0)), timers=timers)
    assert timers[0].srtt_s == pytest.approx(2.0) and timers[0].rttvar_s == pytest.approx(1.0)


def test_a_lost_result_is_sent_again_from_the_shadow_copy():
    # Worker 0's result of chunk 0 is lost on its way back: worker 1 finishes at 2, worker 0
    # resends at 10 and the node answers it alone: 12.
    times = simulate_pass(protocol(workers=2, window=1), 1, losing(("downlink", 0, 0, 0)))
    assert times.finish_s == pytest.approx((12.0, 2.0))


def test_repeated_loss_backs_off_by_doubling():
    # Lost at 0 and again on its first resend (at 10): the second timeout is 2 × 10 later, at 30;
    # the third copy gets through, its result at 32.
    times = simulate_pass(protocol(window=1), 1, losing((UPLINK, 0, 0, 0), (UPLINK, 0, 0, 1)))
    assert times.time_s == pytest.approx(32.0) and times.retransmits == 2


def test_loss_slows_the_allreduce_and_more_loss_slows_it_more():
    p = InaProtocol(workers=4, window=16, frame_s=1e-6, min_rto_s=30e-6, initial_rto_s=60e-6)
    lossless, _ = lossy_allreduce_s(p, 2000, 6, 0.0, 0.0, 0.0, seed=1)
    # Two passes of 2,000 + 6 frames, each one frame of pipeline, plus nothing for α.
    assert lossless == pytest.approx(2008e-6, rel=1e-6)
    one, retransmits_one = lossy_allreduce_s(p, 2000, 6, 0.0, 0.01, 0.01, seed=1)
    five, retransmits_five = lossy_allreduce_s(p, 2000, 6, 0.0, 0.05, 0.05, seed=1)
    assert lossless < one < five and 0 < retransmits_one < retransmits_five
    # Each worker loses a chunk at one of three points with p ≈ 3%, and every worker waits for
    # the others' losses too: about 1 - 0.99^(2·4 + 1) ≈ 9% of chunks stall, each for at least the
    # part of its timeout (30 frames) that the window (16 frames) does not cover.
    assert one >= lossless + 0.05 * 2000 * (30 - 16) * 1e-6


def test_a_lossy_ina_run_sends_real_packets_and_is_judged_with_its_own_timers():
    """Loss is per packet: the run's byte scale is 1 whatever the dilation, and its prediction prices
    the timeouts with the timers' floor of 2 ms of wall time at that dilation; lossless, the closed
    form: 2·α + (C + E) frames, C = ceil(20 MB / 1,440 B) = 13,889 chunks, E = ceil(C / 360) = 39."""
    from testbed.planning.overrides import apply_overrides
    from testbed.planning.plan import predict_scenario, prepare
    from testbed.planning.scenario_file import load_scenario

    from ..conftest import ROOT

    lossy = load_scenario(ROOT / "scenarios" / "ina-lossy.yaml")
    lossless = apply_overrides(lossy, {"fabric.link_loss_frac": 0.0, "fabric.node_drop_frac": 0.0})
    frame_s = 1508 * 8 / (100e9 * 1514 / 1448)
    closed_form = 2 * 5e-6 + (13889 + 39) * frame_s
    assert predict_scenario(lossless).iteration_time_s == pytest.approx(closed_form)
    prepared = prepare(lossy)
    assert prepared.plan.dilation.byte_scale == 1.0
    waits_s = prepared.prediction.breakdown.retransmission_s
    assert waits_s > 0 and prepared.prediction.iteration_time_s == pytest.approx(closed_form + waits_s)
    # A fixed byte scale other than 1 is kept, and the run says what it does to the loss.
    coarse = prepare(apply_overrides(lossy, {"emulation.byte_scale": 0.01}))
    assert coarse.plan.dilation.byte_scale == 0.01 and any("per emulated packet" in n for n in coarse.plan.notes)

"""ATP's shared slots (testbed/fabrics/ina/shared_slots.py) against timelines worked out by hand."""

from __future__ import annotations

import pytest

from testbed.fabrics.ina.shared_slots import SharedNode, SharedPool, shared_allreduce_s


def test_a_slot_is_held_until_its_owner_has_moved_past_it():
    """Two one-worker jobs, one slot, a window of one, a frame of 1. At 1 both first chunks reach
    the node: job 1's takes the slot and its result is back at 2; job 2's finds the slot complete
    but its owner's worker still waiting for chunk 0 (its packet said so): it collides, goes down
    worker 0's link of its own job (at 2) and is summed there. Both second chunks arrive at 3: job
    1's packet says it is past chunk 0, so the slot is reclaimed; job 2's then collides with it.
    Both done at 4; half the chunks collided."""
    node = SharedNode(SharedPool(jobs=2, workers=1, window=1, pool_slots=1, frame_s=1.0))
    result = node.run_pass(2, (0.0, 0.0))
    assert result.finish_s == pytest.approx((4.0, 4.0))
    assert (result.collisions, result.chunks) == (2, 4)


def test_without_collisions_a_pass_streams_like_reserved_slots():
    # A pool far larger than the windows: C frames out, the last result one frame later.
    node = SharedNode(SharedPool(jobs=2, workers=4, window=8, pool_slots=1 << 20, frame_s=1.0))
    result = node.run_pass(500, (0.0,) * 8)
    assert result.collisions == 0 and result.time_s == pytest.approx(501.0)


def test_colliding_chunks_load_the_fallback_hosts_link():
    """Worker 0's link down from the node carries the results of the chunks summed in slots and
    every worker's contribution to the colliding ones: (1 − f)·C + n·f·C = C·(1 + f·(n − 1)) frames,
    a floor under the iteration. A chunk collides when its hashed slot is held; a job holds at most
    two windows of slots (a slot is freed once a later chunk says every worker is past it, a window
    on), so with a pool of P slots the share stays under 2·2·8/P; a pool far larger than the
    windows has no collisions."""
    times, share = {}, {}
    for slots in (32, 128, 4096, 1 << 20):
        pool = SharedPool(jobs=2, workers=4, window=8, pool_slots=slots, frame_s=1.0)
        times[slots], share[slots] = shared_allreduce_s(pool, 2000, 6, 0.0)
    assert share[1 << 20] == 0 and times[1 << 20] == pytest.approx(2008.0)  # two passes, a frame each to drain
    assert share[32] > share[128] > share[4096] > 0
    assert share[128] < 32 / 128 and share[4096] < 32 / 4096
    for slots in (32, 128):
        assert times[slots] >= 2006 * (1 + share[slots] * 3)

"""The mechanical hand rules of bench/stepwise_hand.py against the all-to-all worked on paper in
docs/chakra-hand-times.md: what lets the bench use them where paper runs out (16 GPUs)."""

from __future__ import annotations

import sys

import pytest

from ..conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from stepwise_hand import pairwise_alltoall_s, relay_path  # noqa: E402

# The 8-GPU plan of docs/chakra-hand-times.md: one wavelength to each ring neighbour, and these.
EXTRA = {(0, 2), (0, 3), (1, 3), (1, 6), (2, 0), (2, 4), (3, 0), (3, 1), (4, 2), (4, 6), (5, 1), (5, 7),
         (6, 4), (7, 5)}
PLAN = {**{(i, (i + 1) % 8): 1 for i in range(8)}, **{(i, (i - 1) % 8): 1 for i in range(8)},
        **{pair: 1 for pair in EXTRA}}


def test_relays_take_the_fewest_hops_and_the_lowest_next_hop():
    assert relay_path(PLAN, 6, 0) == [(6, 7), (7, 0)]  # 6→5→1→0 is longer
    assert relay_path(PLAN, 0, 5) == [(0, 7), (7, 5)]  # 0→3→… and 0→7→5: the doc's 0→7→5
    assert relay_path(PLAN, 5, 0) == [(5, 1), (1, 0)]  # 5→1→0 before 5→4→… or 5→6→…


def test_the_8_gpu_pairwise_all_to_all_takes_the_papers_11v_plus_7_alpha():
    m, alpha, w = 1_048_576, 5e-6, 25e9
    v = m / 8 * 8 / w
    assert pairwise_alltoall_s(8, m, alpha, w, PLAN) == pytest.approx(11 * v + 7 * alpha)

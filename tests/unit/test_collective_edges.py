"""The sparse count of who sends what in a collective is the dense matrix's, entry for entry: the
ring collectives' right-neighbour edges in closed form, the rest read from the matrix."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.shared.collective_plans import collective_edges, collective_traffic


@settings(max_examples=300, deadline=None)
@given(op=st.sampled_from([("allreduce", "ring"), ("reducescatter", "ring"), ("allgather", "ring"),
                           ("allreduce", "tree"), ("alltoall", "ring"), ("allreduce", "halving-doubling")]),
       hosts=st.integers(1, 48), size=st.integers(1, 10**9))
def test_the_edges_are_the_matrix_entries_with_bytes(op, hosts, size):
    block = collective_traffic(*op, hosts, size)
    dense = tuple((a, b, v) for a, row in enumerate(block) for b, v in enumerate(row) if v)
    assert collective_edges(*op, hosts, size) == dense


def test_a_ring_of_8192_has_one_edge_a_member_and_moves_2_n_minus_1_over_n_of_the_buffer():
    n, size = 8192, 8192 * 1000
    edges = collective_edges("allreduce", "ring", n, size)
    assert len(edges) == n and all(b == (a + 1) % n for a, b, _ in edges)
    assert sum(v for _, _, v in edges) == 2 * (n - 1) * size  # 2(n-1)/n·M from each of n members

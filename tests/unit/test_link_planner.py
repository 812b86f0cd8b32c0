"""The link planner's optimum against an independent solver (HiGHS's MILP through scipy), on
random capacity groups of the two shapes the fabrics build: ports and fibre segments."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import Bounds, LinearConstraint, milp

from testbed.network.link_planner import max_min_links


def _milp_z(demand, pairs, groups, capacity, floor, ceiling):
    """SiP-ML §A.2 in linear form: maximise z with c_p >= z·d_p/scale, each group at most capacity."""
    n, scale = len(pairs), max(demand.values())
    rows, lower, upper = [], [], []
    for pair, size in demand.items():
        row = np.zeros(n + 1)
        row[pairs.index(pair)], row[n] = 1.0, -size / scale
        rows.append(row), lower.append(0.0), upper.append(np.inf)
    for members in groups:
        row = np.zeros(n + 1)
        row[list(members)] = 1.0
        rows.append(row), lower.append(0.0), upper.append(capacity)
    high = np.array([ceiling] * n + [np.inf], dtype=float)
    low = np.array(list(floor) + [0.0], dtype=float)
    found = milp(-np.eye(n + 1)[n], constraints=LinearConstraint(np.array(rows), lower, upper),
                 integrality=np.array([1] * n + [0]), bounds=Bounds(low, high))
    return None if found.x is None else found.x[n]


@settings(max_examples=80, deadline=None)
@given(nodes=st.integers(2, 7), capacity=st.integers(1, 6), ring=st.booleans(), seed=st.integers(0, 10**6))
def test_the_optimum_is_the_integer_programmes(nodes, capacity, ring, seed):
    rng = np.random.default_rng(seed)
    pairs = [(a, b) for a in range(nodes) for b in range(nodes) if a != b and rng.random() < 0.6]
    if not pairs:
        return
    demand = {p: float(rng.integers(1, 10**6)) for p in pairs if rng.random() < 0.8} or {pairs[0]: 1.0}
    groups = [[i for i, p in enumerate(pairs) if p[end] == node] for node in range(nodes) for end in (0, 1)]
    if ring:  # a clockwise segment s (node s to s+1) carries every pair whose path crosses it
        groups += [[i for i, (a, b) in enumerate(pairs) if (s - a) % nodes < (b - a) % nodes] for s in range(nodes)]
    groups = [g for g in groups if g]
    floor = [int(rng.random() < 0.2) for _ in pairs]
    reference = _milp_z(demand, pairs, groups, capacity, floor, capacity)
    solved = max_min_links(demand, pairs, groups, capacity, floor=floor, ceiling=capacity)
    if reference is None or reference <= 1e-9:  # no plan links every demand
        assert solved is None
        return
    # HiGHS meets its constraints within 1e-6 (relative): so much may separate the two optima.
    assert solved is not None and abs(solved.bound_z - reference) <= 1e-6 * reference
    counts = np.array([solved.counts.get(p, 0) for p in pairs])
    assert all(counts[g].sum() <= capacity for g in groups) and (counts >= floor).all() and counts.max() <= capacity
    # The counts meet the optimum, and the spare went only where no group had room left.
    assert min(counts[pairs.index(p)] * max(demand.values()) / d for p, d in demand.items()) >= reference * (1 - 1e-6)
    for p in demand:
        mine = [g for g in groups if pairs.index(p) in g]
        assert counts[pairs.index(p)] == capacity or any(counts[g].sum() == capacity for g in mine)


def test_a_demand_a_million_billion_times_lighter_still_gets_a_link():
    # One transmit port group of 4 links: the light pair needs one, the heavy one gets the other
    # three (z = 3 links per the heaviest demand's bytes); the rounding allowance once gave the
    # light pair none, and the spare step divided by its zero links.
    pairs = [(0, 1), (0, 2)]
    solved = max_min_links({(0, 1): 1.0, (0, 2): 1e-15}, pairs, [[0, 1]], 4)
    assert solved is not None
    assert solved.counts == {(0, 1): 3, (0, 2): 1} and solved.bound_z == 3.0

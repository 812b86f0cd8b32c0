"""The greedy wavelength plan, which re-planning predictions call thousands of times and which
keeps its first phase (ring neighbours and kept pairs) between calls, against the rule written out
plainly here: one wavelength to every ring and kept pair in order, then one to every demand,
heaviest first, then spare wavelengths one at a time to the longest transfer; first fit along
the shorter way round (clockwise on a tie), at most W per interface."""

from __future__ import annotations

import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.fabrics.sip_ring.wavelengths import _greedy


def plain_greedy(traffic, nodes, wavelengths, reach, keep_ring, keep):
    used = {}  # (direction, segment) -> set of wavelengths
    tx, rx = [0] * nodes, [0] * nodes
    demand = {p: v for p, v in traffic.items() if v > 0 and p[0] != p[1]}
    ring = []
    if keep_ring and nodes > 1 and wavelengths >= 2:
        ring = [(i, (i + 1) % nodes) for i in range(nodes)] + [((i + 1) % nodes, i) for i in range(nodes)]
    ring = list(dict.fromkeys(ring + [p for p in keep if p[0] != p[1]]))
    for p in ring:
        demand.setdefault(p, 0.0)

    def route(s, d):
        cw, ccw = (d - s) % nodes, (s - d) % nodes
        ways = [(h, -o, o) for o, h in ((1, cw), (-1, ccw)) if h <= reach]
        if not ways:
            return None
        _, _, o = min(ways)
        return o, [((s + h) % nodes) if o > 0 else ((s - h - 1) % nodes) for h in range(min(ways)[0])]

    routes = {p: r for p in demand if (r := route(*p)) is not None}
    got = {}

    def add(p):
        s, d = p
        if tx[s] >= wavelengths or rx[d] >= wavelengths:
            return False
        o, segs = routes[p]
        free = [w for w in range(wavelengths) if all(w not in used.get((o, g), set()) for g in segs)]
        if not free:
            return False
        for g in segs:
            used.setdefault((o, g), set()).add(free[0])
        tx[s] += 1
        rx[d] += 1
        got.setdefault(p, []).append(free[0])
        return True

    for p in ring:
        if p in routes:
            add(p)
    for p in sorted(routes, key=lambda p: -demand[p]):
        if p not in got:
            add(p)
    heap = [(-demand[p] / len(w), p) for p, w in got.items() if demand[p] > 0]
    heapq.heapify(heap)
    while heap:
        _, p = heapq.heappop(heap)
        if add(p):
            heapq.heappush(heap, (-demand[p] / len(got[p]), p))
    return {p: (routes[p][0], tuple(w)) for p, w in got.items()}


@st.composite
def rings(draw):
    nodes = draw(st.integers(2, 10))
    pair = st.tuples(st.integers(0, nodes - 1), st.integers(0, nodes - 1))
    traffic = draw(st.dictionaries(pair, st.sampled_from([0.0, 1e3, 5e3, 2e4, 1e6]), max_size=3 * nodes))
    keep = tuple(draw(st.lists(pair, max_size=nodes)))
    return traffic, nodes, draw(st.integers(1, 6)), draw(st.integers(1, nodes)), draw(st.booleans()), keep


@settings(max_examples=300, deadline=None)
@given(rings())
def test_greedy_plans_as_the_plain_rule_does(case):
    traffic, nodes, wavelengths, reach, keep_ring, keep = case
    found = _greedy(traffic, nodes, wavelengths, 25e9, reach, keep_ring, keep)
    plan = {p: (path.direction, path.wavelengths) for p, path in found.plan.lightpaths.items()}
    assert plan == plain_greedy(traffic, nodes, wavelengths, reach, keep_ring, keep)
    again = _greedy(traffic, nodes, wavelengths, 25e9, reach, keep_ring, keep)  # from the kept first phase
    assert list(again.plan.lightpaths.items()) == list(found.plan.lightpaths.items())

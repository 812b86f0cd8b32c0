"""Relay paths are the paths hop-by-hop routes make: shortest (against networkx's breadth-first
lengths), the same whatever order the links come in, and every node on a path continues it with
its own route to the destination (the oracle once priced a path the routes did not take)."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.network.relay import Relays, adjacency, next_hops_to, relay_path

links_strategy = st.integers(min_value=2, max_value=9).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] != p[1]),
                         max_size=4 * n)))


@settings(max_examples=300, deadline=None)
@given(links_strategy, st.randoms(use_true_random=False))
def test_relay_paths_are_shortest_consistent_and_order_free(graph, shuffler):
    n, links = graph
    neighbours = adjacency(n, links)
    shuffled = list(links)
    shuffler.shuffle(shuffled)
    again = adjacency(n, shuffled)
    reference = nx.DiGraph()
    reference.add_nodes_from(range(n))
    reference.add_edges_from(links)
    for dst in range(n):
        towards = next_hops_to(neighbours, dst)
        assert towards == next_hops_to(again, dst)
        for src in range(n):
            path = relay_path(neighbours, src, dst)
            if src != dst and not nx.has_path(reference, src, dst):
                assert path is None and src not in towards
                continue
            assert path is not None
            assert len(path) - 1 == nx.shortest_path_length(reference, src, dst)
            assert all(reference.has_edge(a, b) for a, b in zip(path, path[1:]))
            for i, node in enumerate(path[:-1]):
                assert relay_path(neighbours, node, dst) == path[i:]  # each hop's own route continues it


@settings(max_examples=300, deadline=None)
@given(links_strategy, st.randoms(use_true_random=False))
def test_relays_keep_each_destinations_search_and_take_direct_links_as_they_are(graph, shuffler):
    """The oracle's plans ask Relays, which searches from a destination only as far as the sources
    asked need and resumes there, and answers a direct link without searching: every answer, in
    any order of asking, is the one hop-by-hop route's."""
    n, links = graph
    neighbours = adjacency(n, links)
    relays = Relays(n, links)
    asked = [(src, dst) for src in range(n) for dst in range(n)]
    shuffler.shuffle(asked)
    for src, dst in asked:
        assert relays.path(src, dst) == relay_path(neighbours, src, dst)


def test_ties_go_to_the_lowest_numbered_next_hop():
    """4 → 0 is two hops either via 1 or via 3: the route, and so the oracle's path, take 1."""
    neighbours = adjacency(5, [(4, 3), (4, 1), (3, 0), (1, 0)])
    assert relay_path(neighbours, 4, 0) == [4, 1, 0]


def test_searches_dropped_for_room_are_made_again_alike(monkeypatch):
    """Relays keeps a bounded number of destinations' searches: with room for one, every answer,
    asked in a shuffled order, is still the hop-by-hop route's."""
    import random

    from testbed.network import relay
    monkeypatch.setattr(relay, "SEARCHES_KEPT", 1)
    rng = random.Random(7)
    for _ in range(40):
        n = rng.randint(2, 12)
        links = [(a, b) for a in range(n) for b in range(n) if a != b and rng.random() < 0.25]
        neighbours = adjacency(n, links)
        relays = Relays(n, links)
        asked = [(s, d) for s in range(n) for d in range(n)] * 2
        rng.shuffle(asked)
        for src, dst in asked:
            assert relays.path(src, dst) == relay_path(neighbours, src, dst)


def test_relaying_many_pairs_says_how_far_it_has_got():
    """A one-way ring of 40 GPUs, every pair relayed: the reports name the paths done, rise from 0
    and stay below 1, and the paths are the ring's (src to dst clockwise, dst - src hops)."""
    from testbed.core import progress
    from testbed.network.flow_model import paths_over

    n = 40
    links = {(g, (g + 1) % n): ("circuit", g, (g + 1) % n) for g in range(n)}
    pairs = [(s, d) for s in range(n) for d in range(n) if s != d]
    heard: list[tuple[str, float]] = []
    with progress.reporting(lambda what, done: heard.append((what, done))):
        found = paths_over(Relays(n, links), links, pairs)
    assert len(found[(3, 1)]) == (1 - 3) % n and found[(0, 1)] == (links[(0, 1)],)
    shares = [done for _, done in heard]
    assert heard[0] == (f"relay paths 0/{len(pairs):,}", 0.0) and shares == sorted(shares) and shares[-1] < 1

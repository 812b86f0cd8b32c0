"""Relaying through GPUs: the shortest hop path over direct links (circuits or lightpaths). One
implementation, shared by the oracle's flow models and the controller's host routes."""

from __future__ import annotations

from collections import deque
from typing import Iterable


def adjacency(nodes: int, links: Iterable[tuple[int, int]]) -> dict[int, list[int]]:
    """Directed neighbours of every node, lowest first (the order links are given in does not
    matter: ties between equally short paths always go the same way)."""
    out: dict[int, set[int]] = {g: set() for g in range(nodes)}
    for a, b in links:
        out[a].add(b)
    return {g: sorted(peers) for g, peers in out.items()}


def next_hops_to(neighbours: dict[int, list[int]], dst: int) -> dict[int, int]:
    """Every node's next hop towards `dst` on a shortest path (the lowest-numbered of equally good
    ones); nodes that cannot reach dst are absent.

    A tree towards dst, not a path chosen at each source: relayed packets are forwarded by every
    GPU on the way with its own route to dst, so the path a flow takes is the one its hops' routes
    make, and the oracle must price that path."""
    return _next_hops(neighbours, _incoming(neighbours), dst)


def _incoming(neighbours: dict[int, list[int]]) -> dict[int, list[int]]:
    incoming: dict[int, list[int]] = {g: [] for g in neighbours}
    for a, peers in neighbours.items():
        for b in peers:
            incoming.setdefault(b, []).append(a)
    return incoming


def _next_hops(neighbours: dict[int, list[int]], incoming: dict[int, list[int]], dst: int) -> dict[int, int]:
    hops = {dst: 0}
    queue = deque([dst])
    while queue:
        here = queue.popleft()
        for prev in incoming.get(here, ()):
            if prev not in hops:
                hops[prev] = hops[here] + 1
                queue.append(prev)
    return {node: min(b for b in neighbours[node] if hops.get(b) == far - 1)
            for node, far in hops.items() if node != dst}


# Destinations whose searches Relays keeps, the least recently asked dropped first: paths are asked
# destination by destination, so a few suffice; at 16,384 GPUs 512 of them took a gigabyte.
SEARCHES_KEPT = 64


class _Towards:
    """Shortest hops towards one destination, found as far as the sources asked for need: a
    breadth-first search backwards from dst, resumed where it stopped. Once a source is found,
    every node nearer to dst is too, so the next hops along its path are those of the whole tree."""

    def __init__(self, dst: int) -> None:
        self.hops = {dst: 0}
        self.queue = deque([dst])
        self.next: dict[int, int] = {}

    def reach(self, incoming: dict[int, list[int]], src: int) -> bool:
        hops, queue = self.hops, self.queue
        while src not in hops and queue:
            here = queue.popleft()
            for prev in incoming.get(here, ()):
                if prev not in hops:
                    hops[prev] = hops[here] + 1
                    queue.append(prev)
        return src in hops

    def next_hop(self, neighbours: dict[int, list[int]], node: int) -> int:
        found = self.next.get(node)
        if found is None:
            far = self.hops[node]
            found = self.next[node] = min(b for b in neighbours[node] if self.hops.get(b) == far - 1)
        return found


class Relays:
    """Relay paths over one set of direct links, each destination's search kept and resumed (a
    plan at hundreds of GPUs asks for hundreds of pairs towards the same destinations; at
    thousands, a whole tree per destination cost minutes)."""

    def __init__(self, nodes: int, links: Iterable[tuple[int, int]]) -> None:
        self.neighbours = adjacency(nodes, links)
        self.direct = {(a, b) for a, peers in self.neighbours.items() for b in peers}
        self._incoming: dict[int, list[int]] | None = None
        self._towards: dict[int, _Towards] = {}

    def path(self, src: int, dst: int) -> list[int] | None:
        """As relay_path: a direct link is its own shortest path (no search needed)."""
        if src == dst:
            return [src]
        if (src, dst) in self.direct:
            return [src, dst]
        if self._incoming is None:
            self._incoming = _incoming(self.neighbours)
        towards = self._towards.pop(dst, None) or _Towards(dst)
        self._towards[dst] = towards  # the most recently asked last
        if len(self._towards) > SEARCHES_KEPT:
            del self._towards[next(iter(self._towards))]
        if not towards.reach(self._incoming, src):
            return None
        path = [src]
        while path[-1] != dst:
            path.append(towards.next_hop(self.neighbours, path[-1]))
        return path


def relay_path(neighbours: dict[int, list[int]], src: int, dst: int) -> list[int] | None:
    """Nodes from src to dst (both included) with the fewest hops, as hop-by-hop forwarding takes
    them (next_hops_to), or None if dst is unreachable."""
    if src == dst:
        return [src]
    return _walk(next_hops_to(neighbours, dst), src, dst)


def _walk(towards: dict[int, int], src: int, dst: int) -> list[int] | None:
    """The path each hop's next hop towards dst makes from src; None if src cannot reach dst."""
    if src not in towards:
        return None
    path = [src]
    while path[-1] != dst:
        path.append(towards[path[-1]])
    return path

"""Relaying through GPUs: the shortest hop path over direct links (circuits or lightpaths). One
implementation, shared by the oracle's flow models and the controller's host routes."""

from __future__ import annotations

from collections import deque
from typing import Iterable


def adjacency(nodes: int, links: Iterable[tuple[int, int]]) -> dict[int, list[int]]:
    """Directed neighbours of every node, in the order the links are given (that order breaks ties)."""
    out: dict[int, list[int]] = {g: [] for g in range(nodes)}
    for a, b in links:
        if b not in out[a]:
            out[a].append(b)
    return out


def relay_path(neighbours: dict[int, list[int]], src: int, dst: int) -> list[int] | None:
    """Nodes from src to dst (both included) with the fewest hops, or None if dst is unreachable."""
    if src == dst:
        return [src]
    previous: dict[int, int | None] = {src: None}
    queue = deque([src])
    while queue and dst not in previous:
        here = queue.popleft()
        for nxt in neighbours[here]:
            if nxt not in previous:
                previous[nxt] = here
                queue.append(nxt)
    if dst not in previous:
        return None
    path: list[int] = []
    node: int | None = dst
    while node is not None:
        path.append(node)
        node = previous[node]
    return list(reversed(path))

"""Hand rules of docs/chakra-hand-times.md applied mechanically: a pairwise all-to-all on SiP-Ring
lightpaths, step by step, for plans too large to work through on paper.

The rules, and nothing of the oracle's code: step t sends M/n from i to i + t; a pair without a
lightpath relays over the shortest path of lightpaths, ties to the lowest-numbered next hop; flows
on one lightpath share it max-min (progressive filling, re-solved whenever a flow starts or ends);
a message starts once both its ends reach its step, and a rank reaches the next step α after its
send and its receive are delivered. It reproduces the 8-GPU table worked by hand in that document
(11v + 7α), which is what makes its 16-GPU figure a hand time and not a second oracle."""

from __future__ import annotations

from collections import deque

Link = tuple[int, int]


def relay_path(lightpaths: dict[Link, int], src: int, dst: int) -> list[Link]:
    """The lightpaths a message from src to dst crosses: fewest hops, ties to the lowest next hop."""
    into: dict[int, list[int]] = {}
    for a, b in lightpaths:
        into.setdefault(b, []).append(a)
    hops = {dst: 0}
    queue = deque([dst])
    while queue:
        node = queue.popleft()
        for prev in into.get(node, []):
            if prev not in hops:
                hops[prev] = hops[node] + 1
                queue.append(prev)
    path, node = [], src
    while node != dst:
        nxt = min(b for a, b in lightpaths if a == node and hops.get(b, -1) == hops[node] - 1)
        path.append((node, nxt))
        node = nxt
    return path


def max_min_rates(flows: dict[int, list[Link]], capacity_bps: dict[Link, float]) -> dict[int, float]:
    """Progressive filling: raise every unfrozen flow's rate together until a lightpath fills."""
    rates: dict[int, float] = {}
    left = dict(capacity_bps)
    active = set(flows)
    while active:
        share = {link: left[link] / sum(1 for f in active if link in flows[f])
                 for link in {link for f in active for link in flows[f]}}
        link, level = min(share.items(), key=lambda item: item[1])
        for f in list(active):
            if link in flows[f]:
                rates[f] = level
                active.discard(f)
                for crossed in flows[f]:
                    left[crossed] -= level
    return rates


def pairwise_alltoall_s(n: int, size_bytes: float, alpha_s: float, wavelength_bps: float,
                        lightpaths: dict[Link, int]) -> float:
    """The all-to-all's time under the rules above."""
    capacity = {link: count * wavelength_bps for link, count in lightpaths.items()}
    chunk_bits = size_bytes * 8 / n
    ready = [0.0] * n  # when each rank reaches its next step
    step = [1] * n
    sent: dict[int, float] = {}  # rank -> when its step's send was delivered
    received: dict[int, float] = {}
    flows: dict[int, list[Link]] = {}  # sender -> path, for the message of the sender's step
    left_bits: dict[int, float] = {}
    started: set[tuple[int, int]] = set()
    now = 0.0
    while min(step) < n:
        for i in range(n):  # messages whose two ends have reached their step start now
            t = step[i]
            if t < n and (i, t) not in started:
                j = (i + t) % n
                if step[j] == t and ready[i] <= now and ready[j] <= now:
                    started.add((i, t))
                    flows[i] = relay_path(lightpaths, i, j)
                    left_bits[i] = chunk_bits
        rates = max_min_rates(flows, capacity) if flows else {}
        upcoming = [r for r in ready if r > now]
        finishes = [now + left_bits[f] / rates[f] for f in flows]
        following = min(finishes + upcoming)
        for f in list(flows):
            left_bits[f] -= rates[f] * (following - now)
        now = following
        for f in list(flows):
            if left_bits[f] <= 1e-6:
                del flows[f], left_bits[f]
                sent[f] = now
                received[(f + step[f]) % n] = now
        for r in range(n):
            if step[r] < n and r in sent and r in received:
                ready[r] = max(sent.pop(r), received.pop(r)) + alpha_s
                step[r] += 1
        if not flows and all(r <= now for r in ready) and min(step) < n:
            now = max(now, min(ready))
    return max(ready)

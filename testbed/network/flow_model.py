"""The flow model a fabric offers the oracle: which capacitated resources a transfer between two
GPUs of one MP group uses, and the shared pieces kinds build theirs from."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property

from testbed.core import progress
from testbed.network.collectives import ring_allreduce_time_s
from testbed.network.flows import Resource
from testbed.network.relay import Relays

Traffic = dict[tuple[int, int], float]  # bytes per (source, destination) GPU pair
# TCP acknowledges about every second segment: per data packet, half a (small) packet comes back.
ACKS_PER_PACKET = 0.5


@dataclass
class FlowModel:
    """Resources per GPU pair of one MP group (local indices 0..k-1) and their capacities."""

    capacity_bps: dict[Resource, float]
    paths: dict[tuple[int, int], tuple[Resource, ...]] = field(default_factory=dict)
    default: Callable[[int, int], tuple[Resource, ...]] | None = None  # resources for pairs without a plan
    notes: list[str] = field(default_factory=list)
    dp_rate_bps: float | None = None  # what the plan leaves each GPU for its DP ring, where planned
    dark_s: float = 0.0  # retuning time charged on the way (SiP-Ring)

    @cached_property
    def key(self) -> frozenset[tuple[Resource, float]]:
        """The plan's identity: its links and their capacities (paths follow from them); made once,
        when first asked (a plan's capacities are set when it is built)."""
        return frozenset(self.capacity_bps.items())

    def resources(self, src: int, dst: int) -> tuple[Resource, ...]:
        found = self.paths.get((src, dst))
        if found is None:
            if self.default is None:
                raise KeyError(f"no path from GPU {src} to GPU {dst} in this plan")
            found = self.paths[(src, dst)] = self.default(src, dst)
        return found


def nic_capacities(B: float, k: int) -> dict[Resource, float]:
    """Each GPU's own interface: B out and B in."""
    caps: dict[Resource, float] = {}
    for g in range(k):
        caps[("out", g)] = B
        caps[("in", g)] = B
    return caps


def nic_flow_model(B: float, k: int) -> FlowModel:
    """A non-blocking switch: a transfer uses its sender's interface out and its receiver's in."""
    return FlowModel(nic_capacities(B, k), default=lambda s, d: (("out", s), ("in", d)))


PROGRESS_REPORTS = 200  # reports over one call's pairs


def relay_paths(k: int, links: dict[tuple[int, int], Resource],
                traffic: Traffic) -> dict[tuple[int, int], tuple[Resource, ...]]:
    """Shortest hop paths over direct links for every pair with traffic (relaying through GPUs)."""
    return paths_over(Relays(k, links), links, traffic)


def paths_over(relays: Relays, links: dict[tuple[int, int], Resource],
            traffic: Iterable[tuple[int, int]]) -> dict[tuple[int, int], tuple[Resource, ...]]:
    """relay_paths over links whose searches `relays` keeps between calls; asked destination by
    destination, so each search is made once however many it keeps."""
    pairs = list(traffic)
    found = {}
    # Thousands of GPUs relaying an all-to-all take minutes: say how far the paths have got.
    every = max(1, len(pairs) // PROGRESS_REPORTS)
    for done, (src, dst) in enumerate(sorted(pairs, key=lambda pair: pair[1])):
        if done % every == 0:
            progress.report(f"relay paths {done:,}/{len(pairs):,}", done / len(pairs))
        nodes = relays.path(src, dst)
        if nodes is None:
            raise ValueError(f"no path from GPU {src} to GPU {dst}")
        found[(src, dst)] = tuple(links[(a, b)] for a, b in zip(nodes, nodes[1:]))
    return {pair: found[pair] for pair in pairs}


def relayed_forwarding_factor(n: int, traffic: Traffic, plan: Callable[[Traffic], FlowModel], link_kind: str) -> float:
    """Packets forwarded per payload packet when pairs without a direct link relay through GPUs over
    the `link_kind` links (circuits, lightpaths) that `plan` makes for the traffic: each hop crosses
    the fabric once, and so do the acknowledgements on the way back."""
    pairs = {p: v for p, v in traffic.items() if v > 0 and p[0] != p[1]}
    if not pairs:
        return 1.0
    links = [(r[1], r[2]) for r in plan(pairs).capacity_bps if r[0] == link_kind]
    relays = Relays(n, sorted(links))
    packets = weighted = 0.0
    for (src, dst), size in pairs.items():
        forward = relays.path(src, dst)
        back = relays.path(dst, src)
        hops = (len(forward) - 1 if forward else 1) + ACKS_PER_PACKET * (len(back) - 1 if back else 1)
        weighted += size * hops
        packets += size * (1 + ACKS_PER_PACKET)
    return max(1.0, weighted / packets)


def ring_allreduce_s(l: int, grad_bytes: float, rate_bps: float, alpha_s: float) -> float:
    """The DP ring all-reduce among l counterparts at `rate_bps` each (inf when nothing is left)."""
    if rate_bps <= 0:
        return float("inf")
    return ring_allreduce_time_s(l, grad_bytes, rate_bps, alpha_s)

"""Oracle for BytePS and the classic parameter server: chunk pushes and sums simulated as max-min
fair flows over the fabric, as the hosts send them (each worker's pushes in chunk order, a few at
a time; each sum once its last push is in; alpha before every message); plus, on Elect-Cluster,
the intra-server steps as local work."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from testbed.model.units import bytes_to_bits, transfer_time_s
from testbed.network.flow_model import FlowModel
from testbed.network.flows import Flow, max_min_rates
from testbed.shared.byteps_partition import chunk_owners, push_window


@dataclass(frozen=True)
class Instance:
    """One BytePS all-reduce: its GPU machines' ranks, its CPU machines' ranks, and its buffer."""

    group: tuple[int, ...]
    services: tuple[int, ...]
    size_bytes: float
    chunks: int
    classic: bool


def intra_server_s(gpus_per_server: int, size_bytes: float, rate_bps: float, latency_s: float) -> tuple[float, float]:
    """Local work around the network step on a server of g GPUs (BytePS's CPU-assisted
    aggregation): before it, a reduce-scatter over the server switch, the copy of each GPU's 1/g
    to the CPU and the CPU's reduce pass over it; after it, the copy back and the all-gather. The
    copies and the reduce move M/g at the GPU's rate B (taken as its PCIe and memory rate)."""
    g = gpus_per_server
    ring_half = (g - 1) * latency_s + transfer_time_s((g - 1) / g * size_bytes, rate_bps)
    shard = transfer_time_s(size_bytes / g, rate_bps)
    return ring_half + 2 * shard, shard + ring_half


class _Stream:
    """Messages sent in order with at most `window` in flight, each after the sender's alpha wait:
    a worker's pushes (one per service, each confirmed by its receiver) or a service's sums to one
    worker (one connection, so one at a time). Sums are not confirmed: the sender hands a sum to
    the kernel, waits alpha and hands over the next, which queues behind the first on the same
    connection, so that wait overlaps the previous sum's transfer (`buffered`)."""

    def __init__(self, window: int, buffered: bool = False) -> None:
        self.window = window
        self.buffered = buffered
        self.queue: list[tuple[int, int, float, tuple[Any, ...], float]] = []  # (src, dst, bytes, key, queued at)
        self.in_flight = 0
        self.handed_s = -math.inf  # buffered: when the sender handed its last message to the kernel


def simulate_instances(instances: list[Instance], model: FlowModel, latency_s: float) -> float:
    """Seconds until every instance's last sum has arrived at every worker."""
    streams: dict[tuple[Any, ...], _Stream] = {}
    pushes_left: dict[tuple[int, int], int] = {}  # (instance, chunk) -> pushes still to arrive
    owner_of: dict[tuple[int, int], int] = {}

    def stream(name: tuple[Any, ...], window: int, buffered: bool = False) -> _Stream:
        return streams.setdefault(name, _Stream(window, buffered))

    for i, inst in enumerate(instances):
        nodes = inst.group + inst.services
        size = inst.size_bytes / inst.chunks
        owners = chunk_owners(len(inst.group), len(inst.services), inst.classic, inst.chunks)
        for c, o in enumerate(owners):
            owner = owner_of[(i, c)] = nodes[o]
            remote = [w for w in inst.group if w != owner]
            pushes_left[(i, c)] = len(remote)
            for w in remote:
                stream(("push", w), push_window(owners)).queue.append((w, owner, size, ("push", i, c), 0.0))

    def release(key: tuple[int, int], at_s: float) -> None:
        i, c = key
        owner, inst = owner_of[key], instances[i]
        size = inst.size_bytes / inst.chunks
        for w in inst.group:
            if w != owner:
                stream(("sum", owner, w), 1, buffered=True).queue.append((owner, w, size, ("sum", i, c), at_s))

    for key, left in pushes_left.items():
        if left == 0:  # every copy is local (one worker owning its own chunk)
            release(key, 0.0)
    active: list[list[Any]] = []  # [flow, bits left, stream]
    now = finish = 0.0
    while True:
        for st in streams.values():
            while st.queue and st.in_flight < st.window:
                src, dst, size, key, queued_s = st.queue.pop(0)
                st.in_flight += 1
                starts = now + latency_s
                if st.buffered:
                    # Handed over alpha after it was queued and alpha after the previous one was
                    # handed over; on the wire once the previous one has left (now).
                    st.handed_s = max(st.handed_s, queued_s) + latency_s
                    starts = max(now, st.handed_s)
                active.append([Flow(starts, size, model.resources(src, dst)), bytes_to_bits(size), st, key])
        if not active:
            return finish
        running = [a for a in active if a[0].start_s <= now + 1e-15]
        rates = max_min_rates([a[0] for a in running], model.capacity_bps) if running else []
        then = min([now + a[1] / r for a, r in zip(running, rates) if r > 0]
                   + [a[0].start_s for a in active if a[0].start_s > now + 1e-15])
        for a, r in zip(running, rates):
            a[1] -= r * (then - now)
        now = then
        still = []
        for a in active:
            flow, left, st, key = a
            if flow.start_s <= now + 1e-15 and left <= 1e-6 * max(1.0, bytes_to_bits(flow.bytes)):
                st.in_flight -= 1
                finish = max(finish, now)
                if key[0] == "push":
                    pushes_left[key[1:]] -= 1
                    if pushes_left[key[1:]] == 0:
                        release(key[1:], now)
            else:
                still.append(a)
        active = still


def byteps_time_s(instances: list[Instance], model: FlowModel, latency_s: float) -> float:
    if not instances or all(len(inst.group) <= 1 for inst in instances):
        return 0.0
    return simulate_instances(instances, model, latency_s)

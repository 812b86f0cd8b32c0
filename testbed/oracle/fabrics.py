"""Per-fabric flow models: which capacitated resources a transfer between two GPUs uses, and how
long the DP all-reduce between counterpart GPUs takes."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from testbed.oracle.circuits import plan_circuits
from testbed.oracle.collectives import ring_allreduce_time_s
from testbed.oracle.flows import Resource
from testbed.oracle.relay import adjacency, relay_path
from testbed.oracle.wavelengths import WavelengthPlan, plan_wavelengths
from testbed.scenario import Fabric
from testbed.topology import ecmp_spine
from testbed.units import gbps_to_bps, transfer_time_s, us_to_s


@dataclass
class FlowModel:
    """Resources per GPU pair of one MP group (local indices 0..k-1) and their capacities."""

    capacity_bps: dict[Resource, float]
    paths: dict[tuple[int, int], tuple[Resource, ...]] = field(default_factory=dict)
    default: Callable[[int, int], tuple[Resource, ...]] | None = None  # resources for pairs without a plan
    notes: list[str] = field(default_factory=list)
    dp_rate_bps: float | None = None  # what the plan leaves each GPU for its DP ring, where planned
    dark_s: float = 0.0  # retuning time charged on the way (SiP-Ring)

    def resources(self, src: int, dst: int) -> tuple[Resource, ...]:
        found = self.paths.get((src, dst))
        if found is None:
            if self.default is None:
                raise KeyError(f"no path from GPU {src} to GPU {dst} in this plan")
            found = self.paths[(src, dst)] = self.default(src, dst)
        return found


def _nic(B: float, k: int) -> dict[Resource, float]:
    caps = {}
    for g in range(k):
        caps[("out", g)] = B
        caps[("in", g)] = B
    return caps


def _relay_paths(k: int, links: dict[tuple[int, int], Resource],
                 traffic: dict[tuple[int, int], float]) -> dict[tuple[int, int], tuple[Resource, ...]]:
    """Shortest hop paths over direct links for every pair with traffic (relaying through GPUs)."""
    neighbours = adjacency(k, links)
    paths = {}
    for (src, dst) in traffic:
        nodes = relay_path(neighbours, src, dst)
        if nodes is None:
            raise ValueError(f"no path from GPU {src} to GPU {dst}")
        paths[(src, dst)] = tuple(links[(a, b)] for a, b in zip(nodes, nodes[1:]))
    return paths


def mp_flow_model(fabric: Fabric, k: int, l: int, traffic: dict[tuple[int, int], float],
                  dp_bytes: float = 0.0) -> FlowModel:
    """The flow model of the MP group on `fabric`, planned (circuits, wavelengths) for `traffic`."""
    B = gbps_to_bps(fabric.gpu_bandwidth_gbps)
    kind = fabric.kind
    if kind in ("elect-flat", "ina", "ps"):
        return FlowModel(_nic(B, k), default=lambda s, d: (("out", s), ("in", d)))
    tiers = two_tier(fabric)
    if tiers is not None:
        return leaf_spine_flow_model(k, B, *tiers)
    if kind == "sip-ocs":
        switches = fabric.ocs_switches or 16
        link = B / switches
        # The one-shot plan covers the DP ring too, in proportion to its share of the iteration's
        # bytes; its circuits out to and in from the counterparts take each GPU's own ports.
        rings = {g: dp_bytes for g in range(k)} if l > 1 and dp_bytes > 0 else None
        plan = plan_circuits(traffic, k, switches, link, ring_demand=rings)
        caps, links = {}, {}
        for (i, j), count in plan.circuits.items():
            if i != j:
                caps[("circuit", i, j)] = count * link
                links[(i, j)] = ("circuit", i, j)
        model = FlowModel(caps, _relay_paths(k, links, traffic))
        if l > 1:
            model.dp_rate_bps = min(plan.circuits.get((g, g), 0) for g in range(k)) * link
        model.notes.append(f"circuits by {plan.method}; longest transfer {plan.longest_s * 1e3:.3f} ms, "
                           f"bound {plan.bound_s * 1e3:.3f} ms")
        return model
    if kind == "sip-ring":
        return ring_flow_model(fabric, k, ring_plan(fabric, k, traffic, tuple(sorted(traffic))))
    raise ValueError(f"no flow model for fabric {kind}")


def two_tier(fabric: Fabric) -> tuple[int, float, int] | None:
    """(GPUs per leaf, a leaf's uplink bandwidth in all, spines) of a two-tier electrical fabric:
    Elect-Cluster is a server switch per server under one core switch; None for other kinds."""
    if fabric.kind == "elect-cluster":
        return fabric.gpus_per_server, gbps_to_bps(fabric.server_uplink_gbps), 1
    if fabric.kind == "elect-fattree":
        B = gbps_to_bps(fabric.gpu_bandwidth_gbps)
        return fabric.leaf_hosts, B * fabric.leaf_hosts / fabric.oversubscription, fabric.spines
    return None


def leaf_spine_flow_model(k: int, B: float, per: int, uplink_bps: float, spines: int) -> FlowModel:
    """A pair on different leaves crosses its leaf's uplink to the spine its hash picks and that
    spine's downlink to the other leaf, each a spine's share of the leaf's uplink bandwidth."""
    caps = _nic(B, k)
    for leaf in range(math.ceil(k / per)):
        for spine in range(spines):
            caps[("up", leaf, spine)] = caps[("down", spine, leaf)] = uplink_bps / spines

    def path(s: int, d: int) -> tuple[Resource, ...]:
        if s // per == d // per:
            return (("out", s), ("in", d))
        spine = ecmp_spine(s, d, spines)
        return (("out", s), ("up", s // per, spine), ("down", spine, d // per), ("in", d))

    return FlowModel(caps, default=path)


def ring_plan(fabric: Fabric, k: int, traffic: dict[tuple[int, int], float],
              keep: tuple[tuple[int, int], ...] = ()) -> WavelengthPlan:
    """The controller's wavelength plan for an estimated traffic matrix: the ring stays connected
    and the job's recurring lightpaths (`keep`) keep a wavelength; the estimate shares the rest."""
    assert fabric.wavelengths is not None  # a sip-ring fabric's validation requires it
    return plan_wavelengths(traffic, k, fabric.wavelengths, gbps_to_bps(fabric.wavelength_gbps), fabric.neighbors,
                            keep_ring=True, keep=keep)


def ring_flow_model(fabric: Fabric, k: int, plan: WavelengthPlan) -> FlowModel:
    """Lightpaths as resources; pairs without one relay over lightpaths, hop by hop."""
    wave_bps = gbps_to_bps(fabric.wavelength_gbps)
    caps, links = {}, {}
    for (s, d), path in plan.lightpaths.items():
        caps[("lightpath", s, d)] = len(path.wavelengths) * wave_bps
        links[(s, d)] = ("lightpath", s, d)
    model = FlowModel(caps, _relay_paths(k, links, {pair: 1.0 for pair in links}))
    model.default = lambda s, d: _relay_paths(k, links, {(s, d): 1.0})[(s, d)]
    model.notes.append(f"wavelengths re-planned every {fabric.estimate_period_us:g} µs from the last period's traffic")
    return model


def dp_allreduce_s(fabric: Fabric, k: int, l: int, grad_bytes: float, planned_rate_bps: float | None = None) -> float:
    """All-reduce of `grad_bytes` among the l counterpart GPUs (one per MP group). A circuit plan
    that sized the DP ring passes its rate as `planned_rate_bps`."""
    if l <= 1 or grad_bytes <= 0:
        return 0.0
    B = gbps_to_bps(fabric.gpu_bandwidth_gbps)
    alpha = us_to_s(fabric.latency_us)
    kind = fabric.kind
    if kind == "elect-flat":
        rate = B
    elif (tiers := two_tier(fabric)) is not None:
        # Counterparts k apart: up to min(k, per) of a leaf's GPUs leave it at once, sharing its
        # uplinks (evenly over a fat tree's spines, were the hash perfect).
        per, uplink_bps, _ = tiers
        rate = min(B, uplink_bps / min(k, per)) if k * l > per else B
    elif kind == "sip-ocs":
        rate = planned_rate_bps if planned_rate_bps is not None else B / (fabric.ocs_switches or 16)
        if rate <= 0:
            return float("inf")
    elif kind == "sip-ring":
        # Counterparts are k apart: k rings' lightpaths overlap on every segment; both directions used.
        rate = min(B, 2 * B / k) / max(1, math.ceil(k / fabric.neighbors))
    elif kind == "ina":
        return alpha + transfer_time_s(grad_bytes, B)  # one round: each worker sends M and receives M
    elif kind == "ps":
        # The k MP ranks' DP all-reduces run at once and share the same CPU machines.
        n = l
        return 2 * (n - 1) * alpha + transfer_time_s(byteps_bytes_per_machine(n, fabric.cpu_servers / k, grad_bytes), B)
    else:
        raise ValueError(f"no DP model for fabric {kind}")
    return ring_allreduce_time_s(l, grad_bytes, rate, alpha)


def byteps_bytes_per_machine(n: int, cpus: float, size_bytes: float) -> float:
    """Bytes each machine sends (and receives) in BytePS's optimal split of an all-reduce of
    `size_bytes` among n GPU machines with `cpus` CPU machines of the same bandwidth (Jiang et al.,
    OSDI 2020): a share x of the data is summed on the CPU machines, the rest on the GPU
    machines, with x = 2·cpus(n−1)/(n² + cpus·n − 2·cpus) so that both carry
    2n(n−1)/(n² + cpus·n − 2·cpus)·M. No CPU machine is a ring all-reduce (2(n−1)/n·M); from n
    CPU machines on, a GPU machine's own push and pull (M) bound it."""
    if n <= 1:
        return 0.0
    if cpus >= n:
        return size_bytes
    return 2 * n * (n - 1) * size_bytes / (n * n + cpus * n - 2 * cpus)


# TCP acknowledges about every second segment: per data packet, half a (small) packet comes back.
ACKS_PER_PACKET = 0.5


def forwarding_load_factor(fabric: Fabric, traffic: dict[tuple[int, int], float]) -> float:
    """How many packets the emulating machine forwards per packet of payload, relative to a
    switched fabric: relayed paths cross the fabric once per hop, and so do their acknowledgements
    on the way back. Elect-Flat is 1; a ring all-reduce on one-way OCS circuits with N=8 is 3."""
    n = fabric.hosts
    pairs = {p: v for p, v in traffic.items() if v > 0 and p[0] != p[1]}
    tiers = two_tier(fabric)
    if tiers is not None and pairs:
        # Between leaves a packet crosses three switches (leaf, spine, leaf), within one.
        per = tiers[0]
        crossings = sum(v * (3 if s // per != d // per else 1) for (s, d), v in pairs.items())
        return crossings / sum(pairs.values())
    if fabric.kind not in ("sip-ocs", "sip-ring") or not pairs:
        return 1.0
    # The links the plan makes: the same (cached) plan the prediction uses.
    model = mp_flow_model(fabric, n, 1, pairs)
    links = [(r[1], r[2]) for r in model.capacity_bps if r[0] in ("circuit", "lightpath")]
    neighbours = adjacency(n, sorted(links))
    packets = weighted = 0.0
    for (src, dst), size in pairs.items():
        forward = relay_path(neighbours, src, dst)
        back = relay_path(neighbours, dst, src)
        hops = (len(forward) - 1 if forward else 1) + ACKS_PER_PACKET * (len(back) - 1 if back else 1)
        weighted += size * hops
        packets += size * (1 + ACKS_PER_PACKET)
    return max(1.0, weighted / packets)

"""A hybrid MP/DP plan: one placed MP group replicated over l DP groups, its memory, its verifier."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from testbed.model.errors import InputError
from testbed.placer.balance import TAU_US, balance, inputs_of
from testbed.placer.buckets import Bucket, gradient_buckets
from testbed.placer.place import (
    MpPlacement,
    circular_distance,
    memory_need,
    mp_radius,
    place_mp_group,
)
from testbed.placer.profiles import DeviceProfile
from testbed.placer.settings import PlanSettings
from testbed.placer.zoo import BYTES_PER_ELEMENT, GRADIENT_BYTES, ModelGraph


@dataclass(frozen=True)
class Plan:
    model: str
    k: int
    l: int
    global_batch: int
    degree: int | None
    placement: MpPlacement
    memory_bytes: tuple[float, ...]  # per MP-group GPU
    grad_bytes: tuple[float, ...]  # per MP-group GPU: what its DP ring all-reduces
    mp_traffic: dict[tuple[int, int], float]  # bytes between MP-group GPUs per iteration
    device: DeviceProfile
    messages: dict[tuple[int, int, int, int], float]  # see `messages`
    needs: tuple[tuple[tuple[tuple[int, int], ...], ...], ...]  # needs[op][part]: producing (op, part)s
    # per MP-group GPU: its DP all-reduce in gradient buckets, overlapping the backward compute
    buckets: tuple[tuple[Bucket, ...], ...] = ()

    @property
    def gpus(self) -> int:
        return self.k * self.l

    def dp_peer(self, gpu: int) -> int | None:
        """Where GPU `gpu` sends in its DP ring: the counterpart in the next group."""
        if self.l == 1:
            return None
        return (gpu + self.k) % self.gpus


def messages(placement: MpPlacement) -> dict[tuple[int, int, int, int], float]:
    """Bytes each producing sub-op (op q, part p) sends to GPU dst for consuming op i, keyed (q, p, i, dst).

    Parts of one consumer on the same GPU share what they receive, so a message never carries more
    than the producing part's output."""
    ops = placement.ops
    found: dict[tuple[int, int, int, int], float] = defaultdict(float)
    for i, op in enumerate(ops):
        for c in range(op.parts):
            dst = placement.gpu[i][c]
            for q in op.parents:
                for p, size in inputs_of(ops[q], op, c):
                    if placement.gpu[q][p] != dst:
                        found[(q, p, i, dst)] += size
    for (q, p, i, dst), size in found.items():
        cap = ops[i].largest_message_bytes(ops[q])
        if cap is not None:
            found[(q, p, i, dst)] = min(size, cap)
    return dict(found)


def mp_traffic(placement: MpPlacement, found: dict[tuple[int, int, int, int], float]) -> dict[tuple[int, int], float]:
    traffic: dict[tuple[int, int], float] = defaultdict(float)
    for (q, p, _, dst), size in found.items():
        traffic[(placement.gpu[q][p], dst)] += size
    return dict(traffic)


def needs(placement: MpPlacement) -> tuple[tuple[tuple[tuple[int, int], ...], ...], ...]:
    ops = placement.ops
    return tuple(tuple(tuple((q, p) for q in op.parents for p, _ in inputs_of(ops[q], op, c))
                       for c in range(op.parts)) for op in ops)


def _memory_and_grads(placement: MpPlacement) -> tuple[list[float], list[float]]:
    memory = [0.0] * placement.k
    grads = [0.0] * placement.k
    for i, op in enumerate(placement.ops):
        for c in range(op.parts):
            g = placement.gpu[i][c]
            memory[g] += memory_need(op)
            grads[g] += op.gradient_bytes
    return memory, grads


def make_plan(graph: ModelGraph, device: DeviceProfile, k: int, l: int, global_batch: int,
              degree: int | None, tau_us: float = TAU_US, gpu_bandwidth_gbps: float = 1000.0,
              settings: PlanSettings = PlanSettings()) -> Plan:
    """Balance, place one MP group under the degree limit, and check that it fits in memory."""
    if global_batch % l:
        raise InputError(f"global batch {global_batch} does not divide into {l} DP groups; pick a multiple of {l}")
    local_batch = global_batch // l
    radius = mp_radius(degree, k, l)
    # Under a degree short of the full mesh, an op cut into more than r+1 parts can leave its
    # consumers no GPU within r of every part, and repairing that pulls the graph onto a few
    # GPUs (the Transformer at k = 8, D = 3 ran on 4 of 8). Ops of at most r+1 parts always
    # leave a common window, so the chain of ops can walk around the whole circle.
    tight = radius < k // 2
    # A height split's parts all exchange weight gradients, which only the full mesh allows for
    # any placement of its parts; under a tighter degree convolutions are cut by channel.
    ops = balance(graph, device, local_batch, k, tau_us, max_parts=radius + 1 if tight else None,
                  spatial=settings.spatial and not tight, pairing=settings.pairing)
    placement = place_mp_group(ops, k, radius, gpu_bandwidth_gbps, device.memory_bytes)
    memory, grads = _memory_and_grads(placement)
    scale = GRADIENT_BYTES[settings.gradient_precision] / BYTES_PER_ELEMENT
    grads = [g * scale for g in grads]
    worst = max(memory)
    if worst > device.memory_bytes:
        used = sum(1 for m in memory if m > 0)
        ways = [f"raise the degree (at {degree} an op's parts reach only {radius} neighbouring GPUs, and the model "
                f"sits on {used} of the {k})"] if tight and used < k else []
        ways.append("raise mp (model parallelism)" if l > 1 else "raise mp with more GPUs (fabric.hosts)")
        raise InputError(
            f"{graph.name} at mp={k}, dp={l}, batch {global_batch} needs {worst / 1e9:.1f} GB on one GPU but a "
            f"{device.name} has {device.memory_bytes / 1e9:.0f} GB; {', '.join(ways)} or lower the batch"
        )
    found = messages(placement)
    return Plan(graph.name, k, l, global_batch, degree, placement, tuple(memory), tuple(grads),
                mp_traffic(placement, found), device, found, needs(placement),
                gradient_buckets(placement, settings.bucket_bytes, scale) if l > 1 else ())


def verify(plan: Plan) -> list[str]:
    """Problems with a plan: degree over D, a dependency out of order, memory over the device's."""
    problems = []
    placement = plan.placement
    sends: dict[int, set[int]] = defaultdict(set)
    receives: dict[int, set[int]] = defaultdict(set)
    for src, dst in plan.mp_traffic:
        sends[src].add(dst)
        receives[dst].add(src)
        if circular_distance(src, dst, plan.k) > placement.radius:
            problems.append(f"MP traffic {src}->{dst} spans more than radius {placement.radius}")
    for g in range(plan.k):
        dp = 1 if plan.l > 1 else 0
        for what, peers in (("sends to", sends[g]), ("receives from", receives[g])):
            if plan.degree is not None and len(peers) + dp > plan.degree:
                problems.append(f"GPU {g} {what} {len(peers)} MP peers + {dp} DP peer > degree {plan.degree}")
    for i, op in enumerate(placement.ops):
        for c in range(op.parts):
            for q in op.parents:
                for p, _ in inputs_of(placement.ops[q], op, c):
                    if placement.start_us[i][c] < placement.end_us[q][p] - 1e-9:
                        problems.append(f"{op.op.name}[{c}] starts before its input {placement.ops[q].op.name}[{p}]")
    for g, used in enumerate(plan.memory_bytes):
        if used > plan.device.memory_bytes:
            problems.append(f"GPU {g} needs {used / 1e9:.1f} GB > {plan.device.memory_bytes / 1e9:.0f} GB")
    return problems

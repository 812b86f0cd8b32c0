"""A large model's iteration in closed form (pure), for clusters whose schedules are too large to
simulate step by step: the pipeline formula over each stage's pass times, the tensor-parallel
collectives at the rate every group gets when all run at once on the fabric's plan, and the
data-parallel reduction the last backward pass does not hide. Its traffic is counted by formula."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from testbed.fabrics.ina.node_links import ina_window
from testbed.fabrics.ina.section import InaFabric
from testbed.model.fabric_section import FabricSection
from testbed.model.schedule import CollectiveStep, Step
from testbed.model.units import gbps_to_bps, transfer_time_s, us_to_s
from testbed.network.collectives import Breakdown, Prediction, collective_cost, ina_allreduce_cost
from testbed.network.flow_model import FlowModel
from testbed.oracle.fabrics import schedule_flow_model
from testbed.oracle.schedule_sim import collective_rates_bps
from testbed.workloads.llm.memory import stage_expert_params, stage_layers, stage_params
from testbed.workloads.llm.moe import expert_groups, layer_tokens_to
from testbed.workloads.llm.schedule import Layout, layout_of
from testbed.workloads.llm.section import LlmWorkload
from testbed.workloads.llm.shape import Layers, element_bytes, gradient_bytes
from testbed.workloads.traffic import TrafficBytes

CLOSED_FORM = "closed form: the pipeline formula over each stage's pass times (docs/large-models.md)"


@dataclass(frozen=True)
class _Split:
    """What one GPU of each stage moves: its tensor-parallel collectives per pass and its pipeline
    message."""

    workload: LlmWorkload

    @property
    def layers(self) -> Layers:
        par = self.workload.parallel
        return Layers(self.workload.model.architecture(), par.tp, par.micro_batch)

    def activation(self) -> int:
        return self.layers.activation_bytes(self.workload.precision)

    def pp_message(self) -> int:
        par = self.workload.parallel
        return self.activation() // (par.tp if par.sequence_parallel else 1)

    def tp_collectives(self, layer: int) -> tuple[int, int]:
        """(forward, backward) all-reduce equivalents of one layer and micro-batch (each
        reduce-scatter plus all-gather pair moving what one all-reduce moves): the attention's and
        the MLP's (an MoE layer's shared experts', none without), the backward's twice under full
        recomputation."""
        arch = self.layers.arch
        forward = 1 + (0 if arch.is_moe(layer) and not arch.shared_experts else 1)
        return forward, 2 * forward if self.workload.recompute == "full" else forward

    def all_to_alls(self) -> int:
        """All-to-alls of one MoE layer and micro-batch: dispatch and combine, forward and backward,
        and the forward's again under full recomputation."""
        return 6 if self.workload.recompute == "full" else 4


def _all_expert_params(workload: LlmWorkload) -> float:
    """The routed experts' parameters of one GPU per stage, over all stages and all positions of
    an expert-parallel group: what all the experts' data-parallel groups of one such set hold."""
    par = workload.parallel
    return sum(stage_expert_params(workload, p) for p in range(par.pp)) * par.ep


def _expert_dp_wire(workload: LlmWorkload) -> float:
    """What the experts' gradient reduction puts on the wire (counted in dp)."""
    grad, param = gradient_bytes(workload.grad_precision()), element_bytes(workload.precision)
    both_ways = (grad + param) if workload.parallel.zero else 2 * grad
    return (workload.parallel.expert_dp() - 1) * _all_expert_params(workload) * both_ways


def traffic_formula(workload: LlmWorkload) -> TrafficBytes:
    """traffic_bytes by formula: a ring all-reduce of M over t puts 2(t-1)·M on the wire in all,
    a reduce-scatter or all-gather (t-1)·M."""
    par, split = workload.parallel, _Split(workload)
    arch, m, a = workload.model.architecture(), par.micro_batches(), split.activation()
    # per pipeline and micro-batch: every layer's collectives, the embedding's and the output layer's
    per_pipeline = sum(sum(split.tp_collectives(layer)) for layer in range(arch.layers)) + 2
    tp_wire = 2 * (par.tp - 1) * a * per_pipeline * m * par.dp if par.tp > 1 else 0
    # every expert-parallel group's all-to-alls: from each GPU, all it routes but to its own experts
    token_bytes = arch.hidden * element_bytes(workload.precision)
    ep_wire = sum((par.ep - 1) * sum(layer_tokens_to(workload, layer)) for layer in range(arch.layers)
                  if arch.is_moe(layer)) * split.all_to_alls() * m * token_bytes * par.tp * par.dp // par.ep
    expert_dp, experts = par.expert_dp(), _all_expert_params(workload)
    pp_wire = 2 * m * (par.pp * par.virtual_stages - 1) * split.pp_message() * par.tp * par.dp
    grad = gradient_bytes(workload.grad_precision())
    rings = sum(stage_params(workload, p) for p in range(par.pp)) * par.tp
    if par.zero:
        dp_wire = (par.dp - 1) * rings * (grad + element_bytes(workload.precision)) if par.dp > 1 else 0
    elif par.dp_algorithm == "ina":  # each replica sends its gradients to the aggregation node once
        dp_wire = par.dp * rings * grad
    else:
        dp_wire = 2 * (par.dp - 1) * rings * grad if par.dp > 1 else 0
    expert_wire = _expert_dp_wire(workload)
    embedding = 0
    if arch.tied_embeddings and par.pp > 1:
        embedding = 2 * split.layers.embedding_params() // par.tp * grad * par.tp * par.dp  # a pair: 2(2-1)/2·M each
    sp = par.sequence_parallel
    primitive = {"all-reduce": 0, "reduce-scatter": 0, "all-gather": 0, "all-to-all": int(ep_wire), "broadcast": 0,
                 "send-recv": pp_wire}
    if sp:
        primitive["reduce-scatter"] += tp_wire // 2
        primitive["all-gather"] += tp_wire // 2
    else:
        primitive["all-reduce"] += tp_wire
    if par.zero:
        primitive["reduce-scatter"] += int((par.dp - 1) * rings * grad + (expert_dp - 1) * experts * grad)
        primitive["all-gather"] += int(((par.dp - 1) * rings + (expert_dp - 1) * experts)
                                       * element_bytes(workload.precision))
    else:
        primitive["all-reduce"] += int(dp_wire + expert_wire)
    primitive["all-reduce"] += embedding
    return TrafficBytes(primitive, {"tp": int(tp_wire), "pp": int(pp_wire + embedding),
                                    "dp": int(dp_wire + expert_wire), "ep": int(ep_wire)})


def _ep_groups(workload: LlmWorkload, layout: Layout) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """Every stage's expert-parallel groups and the experts' data-parallel groups."""
    par = workload.parallel
    ep: set[tuple[int, ...]] = set()
    expert_dp: set[tuple[int, ...]] = set()
    for p in range(par.pp):
        ranks = sorted(layout.stage_ranks(p))
        # expert_groups of each rank: a group starts every ep ranks, and ranks at each of the
        # first ep places head the experts' data-parallel groups (asking it for every rank sorted
        # the stage's ranks once per rank: minutes at 16,384 GPUs)
        for rank in ranks[::par.ep] + ranks[:par.ep]:
            groups = expert_groups(ranks, rank, par.ep)
            ep.add(groups.ep_group)
            expert_dp.add(groups.expert_dp_group)
    return sorted(ep), sorted(expert_dp)


@dataclass(frozen=True)
class _AllToAll:
    """What every expert group's all-to-all loads on each resource of the plan: `pairs[r, j]`, how
    many (sender, receiver) pairs whose receiver is the j-th GPU of its group cross resource r."""

    pairs: np.ndarray
    capacity_bps: np.ndarray

    def time_s(self, tokens_to: Sequence[int], token_bytes: float) -> float:
        """The busiest resource's bytes over its capacity: all pairs start together, and max-min
        sharing ends no sooner than that (on a switch, the hot expert's port; on circuits, the
        circuit most relayed paths cross)."""
        if not self.pairs.size:
            return 0.0
        load_bits = self.pairs @ np.asarray(tokens_to, dtype=float) * token_bytes * 8
        return float(np.max(load_bits / self.capacity_bps))


def _all_to_all(model: FlowModel, groups: Sequence[tuple[int, ...]], ep: int) -> _AllToAll:
    index: dict[Any, int] = {}
    counts: list[list[int]] = []
    for group in groups:
        for a in group:
            for j, b in enumerate(group):
                if a == b:
                    continue
                for resource in model.resources(a, b):
                    if resource not in index:
                        index[resource] = len(counts)
                        counts.append([0] * ep)
                    counts[index[resource]][j] += 1
    capacity = np.array([model.capacity_bps[r] for r in index], dtype=float)
    return _AllToAll(np.array(counts, dtype=float).reshape(len(counts), ep), capacity)


def _rates(workload: LlmWorkload, fabric: FabricSection, layout: Layout) -> tuple[dict[str, float], _AllToAll]:
    """The rate of each parallelism's slowest ring edge (a pipeline pair's, both ways) when every
    group of it sends at once, on the plan the fabric makes for the iteration's traffic; for expert
    parallelism the slowest pair's when every GPU sends to every other of its group at once (an
    all-to-all)."""
    par = workload.parallel
    ep_groups, expert_dp_groups = _ep_groups(workload, layout)
    groups: dict[str, list[tuple[int, ...]]] = {
        "tp": [layout.tp_group(d, p) for d in range(par.dp) for p in range(par.pp)],
        "dp": [layout.dp_group(t, p) for t in range(par.tp) for p in range(par.pp)],
        "pp": [(layout.rank(t, d, p), layout.rank(t, d, (p + 1) % par.pp)) for t in range(par.tp)
               for d in range(par.dp) for p in range(par.pp if par.virtual_stages > 1 else par.pp - 1)],
        "edp": expert_dp_groups,
    }
    wire: dict[str, float] = dict(traffic_formula(workload).by_parallelism)
    wire["edp"] = _expert_dp_wire(workload)  # counted in dp
    wire["dp"] -= wire["edp"]
    traffic: dict[tuple[int, int], float] = defaultdict(float)
    for name, members in groups.items():
        edges = [(a, b) for group in members if len(group) > 1 for a, b in zip(group, group[1:] + group[:1])]
        for edge in edges if wire[name] > 0 else ():
            traffic[edge] += wire[name] / len(edges)
    pairs = [(a, b) for group in ep_groups for a in group for b in group if a != b]
    for pair in pairs if wire["ep"] > 0 else ():
        traffic[pair] += wire["ep"] / len(pairs)
    model = schedule_flow_model(fabric, fabric.hosts, dict(traffic))
    out = {}
    for name, members in groups.items():
        steps: list[list[Step]] = [[] for _ in range(fabric.hosts)]
        for group in members if wire[name] > 0 else ():
            if len(group) > 1:
                step = CollectiveStep(name, "allreduce", "ring", group, 1)
                for rank in group:
                    steps[rank].append(step)
        found = collective_rates_bps(steps, model)
        out[name] = min(found.values(), default=float("inf"))
    return out, _all_to_all(model, ep_groups if wire["ep"] > 0 else [], par.ep)


def _ina_reduce_s(fabric: FabricSection, workers: int, size_bytes: float) -> float:
    """Every data-parallel group's INA all-reduce at once: each worker's port carries its stream,
    and the node's summing pipeline (aggregation_gbps) is shared by all of the fabric's workers."""
    assert isinstance(fabric, InaFabric), "check_ina allows dp_algorithm ina on an ina fabric only"
    share = gbps_to_bps(fabric.aggregation_gbps) / fabric.hosts if fabric.aggregation_gbps else None
    return ina_allreduce_cost(workers, size_bytes, gbps_to_bps(fabric.gpu_bandwidth_gbps),
                              us_to_s(fabric.latency_us), share, window_chunks=ina_window(fabric, workers)[1]).time_s


def estimate(workload: LlmWorkload, fabric: FabricSection) -> Prediction:
    par, split = workload.parallel, _Split(workload)
    layers, layout = split.layers, layout_of(workload)
    rate = workload.peak_flops()
    rates, all_to_all = _rates(workload, fabric, layout)
    alpha = us_to_s(fabric.latency_us)
    arch = layers.arch
    ar_s = collective_cost("allreduce", "ring", par.tp, split.activation(), rates["tp"], alpha).time_s \
        if par.tp > 1 else 0.0
    head = layers.head_forward_flops() / rate
    p2p_s = alpha + transfer_time_s(split.pp_message(), rates["pp"]) if par.pp > 1 else 0.0
    token_bytes = arch.hidden * element_bytes(workload.precision)

    def layer_s(layer: int) -> tuple[float, float]:
        """(compute, communication) of one layer's forward and backward of a micro-batch: an MoE
        layer waits for its busiest expert GPU (the most tokens) in each all-to-all."""
        mlp = layers.mlp_forward_flops()
        a2a_s = 0.0
        if arch.is_moe(layer):
            to = layer_tokens_to(workload, layer)
            mlp = (layers.router_forward_flops() + layers.shared_forward_flops()
                   + layers.expert_forward_flops(max(to) * par.ep))
            if par.ep > 1:
                a2a_s = split.all_to_alls() * (alpha + all_to_all.time_s(to, token_bytes))
        forward = (layers.attention_forward_flops() + mlp) / rate
        again = {"full": forward, "selective": layers.attention_core_flops() / rate}.get(workload.recompute, 0.0)
        return 3 * forward + again, sum(split.tp_collectives(layer)) * ar_s + a2a_s

    compute, stage_s = [], []
    for p in range(par.pp):
        per_layer = [layer_s(layer) for layer in stage_layers(workload, p)]
        c = sum(c for c, _ in per_layer) + (3 * head if p == par.pp - 1 else 0.0)
        k = sum(k for _, k in per_layer) + (ar_s if p in (0, par.pp - 1) else 0.0)
        # a stage's pipeline messages share its GPU's link with the tensor-parallel collectives
        k += (par.virtual_stages * 2 - (p == 0) - (p == par.pp - 1)) * (p2p_s - alpha) if par.pp > 1 else 0.0
        compute.append(c)
        stage_s.append(c + k)
    m, v = par.micro_batches(), par.virtual_stages
    # fill and drain through every stage once (a chunk at a time when interleaved), then the slowest
    # stage's passes for the other micro-batches; each pipeline hop a message
    pipeline_s = sum(stage_s) / v + (m - 1 / v) * max(stage_s) + 2 * (par.pp * v - 1) * p2p_s
    # the gradients: the last micro-batch's backward (two thirds of a pass) hides what it can
    grad = gradient_bytes(workload.grad_precision())
    dp_s = 0.0
    op = "reducescatter" if par.zero else "allreduce"
    expert_dp = par.expert_dp()
    params = max(stage_params(workload, p) for p in range(par.pp))
    routed = max(stage_expert_params(workload, p) for p in range(par.pp))
    reduce_s = gather_s = 0.0
    if par.dp > 1:
        if par.dp_algorithm == "ina":
            reduce_s = _ina_reduce_s(fabric, par.dp, params * grad)
        else:
            reduce_s = collective_cost(op, "ring", par.dp, params * grad, rates["dp"], alpha).time_s
        if par.zero:
            gather_s = collective_cost("allgather", "ring", par.dp, params * element_bytes(workload.precision),
                                       rates["dp"], alpha).time_s
    if expert_dp > 1 and routed:  # the experts' gradients, in the same stream
        reduce_s += collective_cost(op, "ring", expert_dp, routed * grad, rates["edp"], alpha).time_s
        if par.zero:
            gather_s += collective_cost("allgather", "ring", expert_dp, routed * element_bytes(workload.precision),
                                        rates["edp"], alpha).time_s
    if reduce_s:
        # the link is the tensor-parallel collectives' too: only the last backward's compute hides it
        last_backward = max(c - (3 * head if p == par.pp - 1 else 0.0) for p, c in enumerate(compute)) * 2 / 3 / v
        dp_s = max(0.0, reduce_s - last_backward) + gather_s
    total = pipeline_s + dp_s
    bubble = sum(stage_s) / v - max(stage_s) / v if par.pp > 1 else 0.0
    compute_s = m * max(compute)
    return Prediction(total, Breakdown(compute_s=compute_s, communication_s=max(0.0, total - compute_s),
                                       exposed_dp_s=dp_s, bubble_s=max(0.0, bubble)),
                      f"{CLOSED_FORM}: {m} micro-batches through {par.pp} stages of {max(stage_s) * 1e3:.3f} ms "
                      f"(tp all-reduce {ar_s * 1e6:.1f} µs at {rates.get('tp', 0) / 1e9:.1f} Gb/s), "
                      f"{dp_s * 1e3:.3f} ms of gradient reduction after the last backward; the fabric's plan "
                      f"for the whole iteration's traffic, not re-planned")

"""Mixture of experts (pure): how a layer's tokens spread over its experts, where the experts sit
(expert-parallel groups), and what each GPU sends each other in the all-to-all (docs/large-models.md,
"Experts")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from testbed.workloads.llm.presets import Architecture
from testbed.workloads.llm.section import LlmWorkload
from testbed.workloads.llm.shape import Layers


def routing_shares(arch: Architecture, skew: float, seed: int, layer: int) -> tuple[float, ...]:
    """π_e, the share of the tokens routed to expert e (Σ π = top_k, each at most 1: a token picks
    top_k different experts). Even at skew 0; else the r-th most popular expert's weight is 1/r^skew,
    which expert is r-th drawn per layer from `seed`, and shares above 1 are capped and the rest
    scaled up (water-filling)."""
    experts, k = arch.experts, arch.top_k
    popularity = np.random.default_rng([seed, layer]).permutation(experts)
    weights = 1.0 / (popularity + 1.0) ** skew
    shares = np.zeros(experts)
    capped = np.zeros(experts, dtype=bool)
    for _ in range(experts):
        free = k - capped.sum()
        shares[~capped] = free * weights[~capped] / weights[~capped].sum()
        over = ~capped & (shares > 1.0)
        if not over.any():
            break
        capped |= over
        shares[capped] = 1.0
    return tuple(float(x) for x in shares)


def tokens_to_each(arch: Architecture, skew: float, seed: int, layer: int, routed_tokens: int,
                   ep: int) -> tuple[int, ...]:
    """(token, expert) pairs one GPU sends to each GPU of its expert-parallel group in one MoE
    layer's dispatch: its `routed_tokens` spread by routing_shares, each expert taking at most
    capacity_factor × its even share (routed_tokens·top_k/experts), GPU j holding experts
    j·E/ep ... (j+1)·E/ep - 1. The same from every GPU (one routing for the layer)."""
    shares = routing_shares(arch, skew, seed, layer)
    per_expert = [routed_tokens * share for share in shares]
    if arch.capacity_factor is not None:
        capacity = arch.capacity_factor * routed_tokens * arch.top_k / arch.experts
        per_expert = [min(tokens, capacity) for tokens in per_expert]
    held = arch.experts // ep
    return tuple(round(sum(per_expert[j * held:(j + 1) * held])) for j in range(ep))


def layer_tokens_to(workload: LlmWorkload, layer: int) -> tuple[int, ...]:
    """tokens_to_each for one MoE layer of `workload`: its routing, each GPU's b·s/tp tokens, ep."""
    model, par = workload.model, workload.parallel
    layers = Layers(model.architecture(), par.tp, par.micro_batch)
    return tokens_to_each(layers.arch, model.routing_skew, model.routing_seed, layer, layers.routed_tokens(), par.ep)


@dataclass(frozen=True)
class ExpertGroups:
    """A GPU's expert-parallel group (consecutive ranks of its stage) and the group that holds the
    same experts on other GPUs (their gradients' data-parallel group)."""

    ep_group: tuple[int, ...]
    position: int  # this GPU's place in ep_group
    expert_dp_group: tuple[int, ...]


def expert_groups(stage_ranks: Sequence[int], rank: int, ep: int) -> ExpertGroups:
    ranks = sorted(stage_ranks)
    q = ranks.index(rank)
    block, position = divmod(q, ep)
    return ExpertGroups(tuple(ranks[block * ep:(block + 1) * ep]), position,
                        tuple(ranks[b * ep + position] for b in range(len(ranks) // ep)))

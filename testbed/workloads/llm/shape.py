"""A large model's numbers (pure): parameters, FLOPs and message bytes per layer and micro-batch,
and the memory a GPU needs, from the architecture and its split (docs/large-models.md derives each)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from testbed.workloads.llm.presets import Architecture

# Megatron-LM pads the vocabulary so that each tensor-parallel rank's share is a multiple of 128
# (--make-vocab-size-divisible-by).
VOCAB_MULTIPLE = 128


def element_bytes(precision: str) -> int:
    """Bytes of one weight or activation kept at `precision`: fp8 runs the matrix multiplies in
    fp8 but keeps weights and activations, and sends them, in bf16."""
    return 4 if precision == "fp32" else 2


def gradient_bytes(precision: str) -> int:
    return {"fp32": 4, "fp16": 2, "bf16": 2}[precision]


@dataclass(frozen=True)
class Layers:
    """One transformer layer and the embedding of `arch` split `tp` ways, at micro-batch `micro_batch`."""

    arch: Architecture
    tp: int
    micro_batch: int

    @property
    def head_dim(self) -> int:
        return self.arch.hidden // self.arch.heads

    def padded_vocab(self) -> int:
        step = VOCAB_MULTIPLE * self.tp
        return math.ceil(self.arch.vocab / step) * step

    def attention_params(self) -> int:
        """Q, K and V projections (K and V over kv_heads) and the output projection."""
        h = self.arch.hidden
        return h * (h + 2 * self.arch.kv_heads * self.head_dim) + h * h

    def mlp_params(self) -> int:
        matrices = 3 if self.arch.mlp == "swiglu" else 2
        return matrices * self.arch.hidden * self.arch.ffn_hidden

    def layer_params(self) -> int:
        """One layer's weights (its two norms' 2·hidden included)."""
        return self.attention_params() + self.mlp_params() + 2 * self.arch.hidden

    def expert_params(self) -> int:
        """One expert's weights (a gated or plain MLP of width expert_ffn_hidden)."""
        matrices = 3 if self.arch.mlp == "swiglu" else 2
        return matrices * self.arch.hidden * self.arch.expert_ffn_hidden

    def dense_params(self, layer: int) -> int:
        """Layer `layer`'s weights that tensor parallelism splits and every replica holds: a dense
        layer's all; an MoE layer's attention, norms, router and shared experts."""
        if not self.arch.is_moe(layer):
            return self.layer_params()
        arch = self.arch
        return (self.attention_params() + 2 * arch.hidden + arch.hidden * arch.experts
                + arch.shared_experts * self.expert_params())

    def routed_params(self, layer: int) -> int:
        """Layer `layer`'s routed experts' weights, all of them (expert parallelism splits them)."""
        return self.arch.experts * self.expert_params() if self.arch.is_moe(layer) else 0

    def routed_tokens(self) -> int:
        """Tokens one GPU routes a micro-batch: its share of the sequence (sequence parallelism)."""
        return self.tokens() // self.tp

    def router_forward_flops(self) -> float:
        return 2 * self.routed_tokens() * self.arch.hidden * self.arch.experts

    def shared_forward_flops(self) -> float:
        return 2 * self.tokens() * self.arch.shared_experts * self.expert_params() / self.tp

    def expert_forward_flops(self, assignments: float) -> float:
        """Routed experts' forward over `assignments` (token, expert) pairs."""
        return 2 * assignments * self.expert_params()

    def embedding_params(self) -> int:
        return self.padded_vocab() * self.arch.hidden

    def tokens(self) -> int:
        return self.micro_batch * self.arch.seq_len

    def attention_forward_flops(self) -> float:
        """One micro-batch through one layer's attention on one tensor-parallel rank: its
        projections (2 FLOPs a weight a token) and the scores and their sum over values (4·b·s²·h)."""
        b, s, h = self.micro_batch, self.arch.seq_len, self.arch.hidden
        return (2 * self.tokens() * self.attention_params() + 4 * b * s * s * h) / self.tp

    def attention_core_flops(self) -> float:
        """What selective recomputation does again: the scores and their sum over values."""
        b, s, h = self.micro_batch, self.arch.seq_len, self.arch.hidden
        return 4 * b * s * s * h / self.tp

    def mlp_forward_flops(self) -> float:
        return 2 * self.tokens() * self.mlp_params() / self.tp

    def head_forward_flops(self) -> float:
        """The output layer's logits over the (padded) vocabulary."""
        return 2 * self.tokens() * self.arch.hidden * self.padded_vocab() / self.tp

    def activation_bytes(self, precision: str) -> int:
        """b·s·h at the activations' precision: what each tensor-parallel collective carries."""
        return self.tokens() * self.arch.hidden * element_bytes(precision)


def layer_activation_bytes(layers: Layers, sequence_parallel: bool, recompute: str, precision: str) -> float:
    """Activations one layer keeps for its backward pass per micro-batch (Korthikanti et al.,
    Reducing Activation Recomputation in Large Transformer Models, 2022, Eq. 1-6; 16-bit, scaled
    for fp32): s·b·h·(10 + 24/t + 5·a·s/(h·t)) without sequence parallelism, s·b·h/t·(34 + 5·a·s/h)
    with it; selective recomputation drops the 5·a·s/h term; full keeps the layer's input alone (2·s·b·h)."""
    arch, t = layers.arch, layers.tp
    sbh = layers.tokens() * arch.hidden
    attention = 5 * arch.heads * arch.seq_len / arch.hidden
    if recompute == "full":
        per_layer = 2 * sbh / (t if sequence_parallel else 1)
    elif sequence_parallel:
        per_layer = sbh / t * (34 + (0 if recompute == "selective" else attention))
    else:
        per_layer = sbh * (10 + 24 / t + (0 if recompute == "selective" else attention / t))
    return per_layer * element_bytes(precision) / 2

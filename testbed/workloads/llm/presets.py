"""Published transformer configurations, by name: the architecture a `workload.model.preset` fills in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Mlp = Literal["gelu", "swiglu"]  # two weight matrices (GPT) or three (Llama's gated unit)


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer's shape (every field of `workload.model` but the preset)."""

    layers: int
    hidden: int
    ffn_hidden: int
    heads: int
    kv_heads: int  # key-value heads (grouped-query attention); = heads for multi-head attention
    vocab: int
    seq_len: int
    mlp: Mlp
    tied_embeddings: bool  # the output layer reuses the input embedding's weights
    # Mixture of experts (0 experts: a dense model): each MoE layer's MLP is `experts` routed
    # experts of width expert_ffn_hidden, top_k of them per token, beside shared_experts every
    # token passes through; the first first_dense_layers stay dense, then every moe_layer_freq-th.
    experts: int = 0
    top_k: int = 0
    expert_ffn_hidden: int = 0
    shared_experts: int = 0
    moe_layer_freq: int = 1
    first_dense_layers: int = 0
    capacity_factor: float | None = None  # an expert's tokens over its even share; None: dropless
    source: str = "the scenario"

    def is_moe(self, layer: int) -> bool:
        """Whether layer `layer` (0-based) has experts for its MLP."""
        return (self.experts > 0 and layer >= self.first_dense_layers
                and (layer - self.first_dense_layers) % self.moe_layer_freq == 0)


PRESETS: dict[str, Architecture] = {
    "gpt3-175b": Architecture(
        layers=96, hidden=12288, ffn_hidden=4 * 12288, heads=96, kv_heads=96, vocab=50257, seq_len=2048,
        mlp="gelu", tied_embeddings=True,
        source="Brown et al., Language Models are Few-Shot Learners (2020), Table 2.1"),
    "llama3-8b": Architecture(
        layers=32, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8, vocab=128256, seq_len=8192,
        mlp="swiglu", tied_embeddings=False,
        source="Llama Team, The Llama 3 Herd of Models (2024), Table 3; meta-llama/Meta-Llama-3-8B config.json"),
    "llama3-70b": Architecture(
        layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8, vocab=128256, seq_len=8192,
        mlp="swiglu", tied_embeddings=False,
        source="Llama Team, The Llama 3 Herd of Models (2024), Table 3; meta-llama/Meta-Llama-3-70B config.json"),
    "llama3-405b": Architecture(
        layers=126, hidden=16384, ffn_hidden=53248, heads=128, kv_heads=8, vocab=128256, seq_len=8192,
        mlp="swiglu", tied_embeddings=False,
        source="Llama Team, The Llama 3 Herd of Models (2024), Table 3; meta-llama/Llama-3.1-405B config.json"),
    "mixtral-8x7b": Architecture(
        layers=32, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8, vocab=32000, seq_len=4096,
        mlp="swiglu", tied_embeddings=False, experts=8, top_k=2, expert_ffn_hidden=14336,
        source="Jiang et al., Mixtral of Experts (2024), Table 1; mistralai/Mixtral-8x7B-v0.1 config.json "
               "(sequences of 4,096 for training; the model takes 32,768)"),
    # DeepSeek-V3's multi-head latent attention is modelled as multi-head attention of the same
    # width (about 10% more attention weights: 205 M a layer against 187 M).
    "deepseek-v3": Architecture(
        layers=61, hidden=7168, ffn_hidden=18432, heads=128, kv_heads=128, vocab=129280, seq_len=4096,
        mlp="swiglu", tied_embeddings=False, experts=256, top_k=8, expert_ffn_hidden=2048, shared_experts=1,
        first_dense_layers=3,
        source="DeepSeek-AI, DeepSeek-V3 Technical Report (2024), §4.2; deepseek-ai/DeepSeek-V3 config.json "
               "(attention as multi-head attention of the same width)"),
}

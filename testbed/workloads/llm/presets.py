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
    source: str = "the scenario"


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
}

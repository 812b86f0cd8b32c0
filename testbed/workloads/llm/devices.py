"""GPUs a large model trains on: dense peak throughput by precision and memory, from the datasheets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Precision = Literal["fp32", "fp16", "bf16", "fp8"]
PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "bf16", "fp8")

# Model FLOPs utilisation a training run reaches: Llama 3's pre-training reports 38-43% of the
# H100's dense BF16 peak (The Llama 3 Herd of Models, Table 4); Megatron-LM's GPT-3 runs 44-52%
# on A100 (Narayanan et al., SC'21, Table 1).
DEFAULT_EFFICIENCY = 0.4


@dataclass(frozen=True)
class Gpu:
    name: str
    peak_tflops: dict[str, float]  # dense (no sparsity) tensor-core peak by precision; fp32 as TF32 where there is one
    memory_gb: float
    source: str


GPUS: dict[str, Gpu] = {
    "v100": Gpu("v100", {"fp32": 15.7, "fp16": 125.0}, 32.0, "NVIDIA V100 Tensor Core GPU datasheet (SXM2 32 GB)"),
    "a100": Gpu("a100", {"fp32": 156.0, "fp16": 312.0, "bf16": 312.0}, 80.0,
                "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80 GB; fp32 as TF32)"),
    "h100": Gpu("h100", {"fp32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9}, 80.0,
                "NVIDIA H100 Tensor Core GPU datasheet (SXM5; dense: half the sparsity figures)"),
    "h200": Gpu("h200", {"fp32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9}, 141.0,
                "NVIDIA H200 Tensor Core GPU datasheet (SXM; dense: half the sparsity figures)"),
    "b200": Gpu("b200", {"fp32": 1100.0, "fp16": 2250.0, "bf16": 2250.0, "fp8": 4500.0}, 180.0,
                "NVIDIA DGX B200 datasheet (1,440 GB over 8 GPUs; dense: half the sparsity figures)"),
}

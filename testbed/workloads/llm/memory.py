"""Memory per GPU (pure): weights, gradients, optimizer state and the activations a stage keeps
for the micro-batches in flight, against the device's (docs/large-models.md, "Memory")."""

from __future__ import annotations

from testbed.model.errors import InputError
from testbed.workloads.llm.section import LlmWorkload
from testbed.workloads.llm.shape import Layers, element_bytes, gradient_bytes, layer_activation_bytes
from testbed.workloads.predicted import GpuMemory

# Adam keeps two moments per parameter in fp32, and a fp32 master copy where the weights are 16-bit
# (Rajbhandari et al., ZeRO, 2020, §3.1: K = 12 bytes a parameter with mixed precision).
ADAM_MOMENT_BYTES = 8
MASTER_COPY_BYTES = 4


def in_flight(workload: LlmWorkload, stage: int) -> float:
    """Micro-batches' worth of one stage's layers whose activations stage `stage` holds at its peak:
    GPipe all m; 1F1B pp - stage; interleaved Megatron's warm-up passes plus one, in chunks."""
    par = workload.parallel
    m = par.micro_batches()
    if par.schedule == "gpipe":
        return m
    if par.schedule == "1f1b":
        return min(par.pp - stage, m)
    v = par.virtual_stages
    passes = min((par.pp - stage - 1) * 2 + (v - 1) * par.pp + 1, m * v)
    return passes / v


def stage_layers(workload: LlmWorkload, stage: int) -> list[int]:
    """The layers one GPU of `stage` runs (its chunks' when interleaved)."""
    par, layers = workload.parallel, workload.model.architecture().layers
    per_chunk = layers // (par.pp * par.virtual_stages)
    return [c * par.pp * per_chunk + stage * per_chunk + i for c in range(par.virtual_stages) for i in range(per_chunk)]


def stage_params(workload: LlmWorkload, stage: int) -> float:
    """Parameters one GPU of `stage` holds that every replica holds: its layers' (of an MoE layer,
    all but the routed experts), the embedding on the first stage and the output layer on the last
    (a tied one there too when pp > 1), split over tp."""
    par, arch = workload.parallel, workload.model.architecture()
    layers = Layers(arch, par.tp, par.micro_batch)
    params = sum(layers.dense_params(layer) for layer in stage_layers(workload, stage))
    if stage == 0:
        params += layers.embedding_params()
    if stage == par.pp - 1 and not (arch.tied_embeddings and par.pp == 1):
        params += layers.embedding_params()
    return params / par.tp


def stage_expert_params(workload: LlmWorkload, stage: int) -> float:
    """The routed experts' parameters one GPU of `stage` holds: its share (1/ep) of its layers'."""
    par = workload.parallel
    layers = Layers(workload.model.architecture(), par.tp, par.micro_batch)
    return sum(layers.routed_params(layer) for layer in stage_layers(workload, stage)) / par.ep


def stage_memory(workload: LlmWorkload, stage: int) -> GpuMemory:
    par, arch = workload.parallel, workload.model.architecture()
    layers = Layers(arch, par.tp, par.micro_batch)
    per_stage = arch.layers // par.pp
    params, routed = stage_params(workload, stage), stage_expert_params(workload, stage)
    expert_dp = par.expert_dp()
    weight = element_bytes(workload.precision)
    optimizer_per_param = ADAM_MOMENT_BYTES + (MASTER_COPY_BYTES if weight < 4 else 0)
    activations = per_stage * in_flight(workload, stage) * layer_activation_bytes(
        layers, par.sequence_parallel, workload.recompute, workload.precision)
    if stage == par.pp - 1:
        activations += 4 * layers.tokens() * layers.padded_vocab() / par.tp  # fp32 logits of one micro-batch
    grad = gradient_bytes(workload.grad_precision())
    return GpuMemory(stage, (params + routed) * weight,
                     params * grad / (par.dp if par.zero >= 2 else 1)
                     + routed * grad / (expert_dp if par.zero >= 2 else 1),
                     params * optimizer_per_param / (par.dp if par.zero >= 1 else 1)
                     + routed * optimizer_per_param / (expert_dp if par.zero >= 1 else 1),
                     activations, workload.memory_bytes())


def heaviest_stage(workload: LlmWorkload) -> GpuMemory:
    return max((stage_memory(workload, p) for p in range(workload.parallel.pp)), key=GpuMemory.total)


def check_memory(workload: LlmWorkload) -> GpuMemory:
    """The heaviest stage's memory; InputError where it exceeds the device's."""
    found = heaviest_stage(workload)
    limit = workload.memory_bytes()
    if found.total() > limit:
        par = workload.parallel
        raise InputError(
            f"{workload.model.name()} with tp {par.tp} × pp {par.pp} × dp {par.dp} needs "
            f"{found.total() / 1e9:.1f} GB per GPU on stage {found.stage} ({found.describe()} GB) but a "
            f"{workload.device.name} has {limit / 1e9:g} GB: raise parallel.tp or parallel.pp, set parallel.zero, "
            f"recompute: full, or a smaller parallel.micro_batch (or device.memory_gb)")
    return found

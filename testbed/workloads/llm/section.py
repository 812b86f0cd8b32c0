"""The `llm` workload's scenario section: a transformer's shape (or a published preset), how it is
split (tensor, pipeline and data parallelism), its precision, recomputation and device."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, Literal

from pydantic import Field, GetJsonSchemaHandler, field_validator, model_validator
from pydantic.json_schema import JsonSchemaValue

from testbed.model.fabric_section import Strict
from testbed.model.limits import MAX_HOSTS
from testbed.model.workload_section import WorkloadSection
from testbed.workloads.llm.devices import DEFAULT_EFFICIENCY, GPUS, Gpu, Precision
from testbed.workloads.llm.presets import PRESETS, Architecture, Mlp

ARCHITECTURE_FIELDS = ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab", "seq_len", "mlp",
                       "tied_embeddings", "experts", "top_k", "expert_ffn_hidden", "shared_experts",
                       "moe_layer_freq", "first_dense_layers", "capacity_factor")
PARALLELISMS = ("tp", "dp", "pp")
PIPELINE_SCHEDULES = ("gpipe", "1f1b", "interleaved")


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _with_expert_width(arch: Architecture) -> Architecture:
    return replace(arch, expert_ffn_hidden=arch.ffn_hidden) if arch.experts and not arch.expert_ffn_hidden else arch


class LlmModel(Strict):
    """`workload.model`: a preset by name, any of whose fields may be set, or every field."""

    preset: str | None = None  # gpt3-175b, llama3-8b, llama3-70b, llama3-405b (docs/large-models.md)
    layers: int | None = Field(default=None, ge=1, le=10_000)  # transformer layers
    hidden: int | None = Field(default=None, ge=1, le=1_000_000)  # model width (h)
    ffn_hidden: int | None = Field(default=None, ge=1, le=10_000_000)  # the MLP's inner width
    heads: int | None = Field(default=None, ge=1, le=100_000)  # attention heads (a)
    kv_heads: int | None = Field(default=None, ge=1, le=100_000)  # default: heads (multi-head attention)
    vocab: int | None = Field(default=None, ge=1, le=100_000_000)  # vocabulary (padded as Megatron-LM pads it)
    seq_len: int | None = Field(default=None, ge=1, le=10_000_000)  # tokens a sequence (s)
    mlp: Mlp | None = None  # gelu (two matrices) or swiglu (three)
    tied_embeddings: bool | None = None  # the output layer shares the input embedding (default false)
    # Mixture of experts (docs/large-models.md, "Experts"): routed experts per MoE layer (0: dense)
    experts: int | None = Field(default=None, ge=0, le=100_000)
    top_k: int | None = Field(default=None, ge=1, le=100_000)  # experts each token is routed to
    expert_ffn_hidden: int | None = Field(default=None, ge=1, le=10_000_000)  # default: ffn_hidden
    shared_experts: int | None = Field(default=None, ge=0, le=1_000)  # experts every token passes through
    moe_layer_freq: int | None = Field(default=None, ge=1, le=10_000)  # every this-many layers is MoE (1: all)
    first_dense_layers: int | None = Field(default=None, ge=0, le=10_000)  # leading layers kept dense
    # tokens an expert takes at most, over its even share (tokens·top_k/experts); unset: dropless
    capacity_factor: float | None = Field(default=None, gt=0, le=1_000)
    # how tokens spread over the experts: 0 evenly; s > 0 a Zipf law (the r-th most popular expert
    # gets a share ∝ 1/r^s), which experts are popular drawn per layer from routing_seed
    routing_skew: float = Field(default=0.0, ge=0, le=10)
    routing_seed: int = Field(default=0, ge=0, le=2**32 - 1)  # draws which experts are popular under a skew

    _lower_preset = field_validator("preset", "mlp", mode="before")(_lower)

    @model_validator(mode="after")
    def _complete(self) -> "LlmModel":
        if self.preset is not None and self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; known: {', '.join(PRESETS)}")
        shape = self.architecture()
        if shape.hidden % shape.heads:
            raise ValueError(f"hidden ({shape.hidden}) must be a multiple of heads ({shape.heads})")
        if shape.heads % shape.kv_heads:
            raise ValueError(f"heads ({shape.heads}) must be a multiple of kv_heads ({shape.kv_heads})")
        if shape.experts and not 1 <= shape.top_k <= shape.experts:
            raise ValueError(f"top_k ({shape.top_k}) must be 1 to experts ({shape.experts}): the experts a token "
                             f"is routed to")
        if not shape.experts and (shape.top_k or shape.shared_experts or self.routing_skew
                                  or shape.capacity_factor is not None):
            raise ValueError("top_k, shared_experts, capacity_factor and routing_skew need experts ≥ 1")
        if shape.experts and not any(shape.is_moe(layer) for layer in range(shape.layers)):
            raise ValueError(f"no layer has experts: first_dense_layers ({shape.first_dense_layers}) leaves "
                             f"none of the {shape.layers} layers")
        return self

    def architecture(self) -> Architecture:
        """The shape: the preset's, with every field the scenario sets in its place."""
        base = PRESETS.get(self.preset or "")
        own = {name: getattr(self, name) for name in ARCHITECTURE_FIELDS if getattr(self, name) is not None}
        if base is not None:
            return _with_expert_width(replace(base, **own))
        missing = [name for name in ("layers", "hidden", "ffn_hidden", "heads", "vocab", "seq_len") if name not in own]
        if missing:
            raise ValueError(f"needs {', '.join(missing)} (or a preset: {', '.join(PRESETS)})")
        own.setdefault("kv_heads", own["heads"])
        own.setdefault("mlp", "gelu")
        own.setdefault("tied_embeddings", False)
        return _with_expert_width(Architecture(**own))

    def name(self) -> str:
        changed = [f"{k} {getattr(self, k)}" for k in ARCHITECTURE_FIELDS if getattr(self, k) is not None]
        if self.routing_skew:
            changed.append(f"routing_skew {self.routing_skew}")
        base = self.preset or "a custom transformer"
        return base + (f" ({', '.join(changed)})" if self.preset and changed else "")


class LlmParallelism(Strict):
    """`workload.parallel`: how the model and the batch are split over the GPUs (Megatron-LM's layout)."""

    tp: int = Field(default=1, ge=1, le=16_384)  # tensor parallelism: each layer's matrices split over tp GPUs
    pp: int = Field(default=1, ge=1, le=16_384)  # pipeline stages, each a run of consecutive layers
    dp: int = Field(default=1, ge=1, le=16_384)  # data-parallel replicas
    # expert parallelism: each MoE layer's experts split over ep GPUs, consecutive ranks of a stage
    # (Megatron-Core's expert layout with expert tensor parallelism 1); ep divides tp × dp
    ep: int = Field(default=1, ge=1, le=16_384)
    # Sequence parallelism: the layer norms and dropout split over the sequence, so each tensor-parallel
    # all-reduce becomes a reduce-scatter and an all-gather of the same bytes
    sequence_parallel: bool = False
    # 0: every replica keeps the whole optimizer (gradients all-reduced); 1: the optimizer state is
    # split over the replicas (Megatron's distributed optimizer: gradients reduce-scattered, parameters
    # all-gathered after the step); 2: the gradients too (the same traffic, less memory)
    zero: Literal[0, 1, 2] = 0
    micro_batch: int = Field(default=1, ge=1, le=1_000_000)  # sequences a stage runs at once
    global_batch: int = Field(ge=1, le=100_000_000)  # sequences per iteration over every replica
    # the pipeline schedule: gpipe (all forwards, then all backwards), 1f1b, or interleaved (1f1b over
    # virtual_stages model chunks a stage)
    schedule: Literal["gpipe", "1f1b", "interleaved"] = "1f1b"
    virtual_stages: int = Field(default=1, ge=1, le=1_000)  # interleaved: model chunks per stage
    # which parallelism's index varies fastest over the ranks (Megatron's default: tp, then dp, then pp);
    # tp-ep-dp-pp says the same (ep groups are always consecutive ranks of a stage)
    order: str = "tp-dp-pp"
    # gradients reduced in buckets of this many bytes as the backward pass fills them; default:
    # Megatron's max(40 M, 1 M × dp) parameters at the gradients' precision
    dp_bucket_bytes: int | None = Field(default=None, ge=1, le=10**12)
    # how the replicas all-reduce their gradients: ring (among themselves), or ina (summed by the
    # fabric's aggregation node: fabric.kind ina, zero 0; each data-parallel group is one INA job)
    dp_algorithm: Literal["ring", "ina"] = "ring"

    _lower_schedule = field_validator("schedule", "order", "dp_algorithm", mode="before")(_lower)

    @model_validator(mode="after")
    def _consistent(self) -> "LlmParallelism":
        names = self.order.split("-")
        if "ep" in names and (names.count("ep") > 1 or names.index("ep") + 1 >= len(names)
                              or names[names.index("ep") + 1] != "dp"):
            raise ValueError(f"order {self.order!r}: ep comes just before dp (e.g. tp-ep-dp-pp): expert-parallel "
                             f"groups are consecutive ranks of a stage's tp × dp GPUs")
        if sorted(name for name in names if name != "ep") != sorted(PARALLELISMS):
            raise ValueError(f"order {self.order!r} must name tp, dp and pp once each, e.g. tp-dp-pp "
                             f"(or tp-ep-dp-pp)")
        per_step = self.micro_batch * self.dp
        if self.global_batch % per_step:
            raise ValueError(f"global_batch ({self.global_batch}) must be a multiple of micro_batch × dp "
                             f"({self.micro_batch} × {self.dp} = {per_step})")
        if self.schedule == "interleaved":
            if self.pp < 2 or self.virtual_stages < 2:
                raise ValueError("schedule interleaved needs pp ≥ 2 and virtual_stages ≥ 2")
            if self.micro_batches() % self.pp:
                raise ValueError(f"schedule interleaved needs the micro-batches per replica "
                                 f"({self.micro_batches()}) to be a multiple of pp ({self.pp})")
        elif self.virtual_stages != 1:
            raise ValueError("virtual_stages applies to schedule interleaved only")
        if self.dp_algorithm == "ina" and self.zero:
            raise ValueError(f"dp_algorithm ina sums all-reduces only, and zero {self.zero} reduce-scatters the "
                             f"gradients and all-gathers the parameters; set zero to 0 or dp_algorithm to ring")
        if self.dp_algorithm == "ina" and self.dp < 2:
            raise ValueError("dp_algorithm ina needs dp ≥ 2: with one replica there is no gradient all-reduce")
        return self

    def micro_batches(self) -> int:
        """Micro-batches each replica runs per iteration (m)."""
        return self.global_batch // (self.micro_batch * self.dp)

    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    def expert_dp(self) -> int:
        """GPUs of a stage that hold the same experts (their gradients' data-parallel group)."""
        return self.tp * self.dp // self.ep


class LlmDevice(Strict):
    """`workload.device`: the GPU (or its name alone, e.g. `device: h100`)."""

    name: str  # v100, a100, h100, h200, b200 (any case)
    efficiency: float = Field(default=DEFAULT_EFFICIENCY, gt=0, le=1)  # share of the peak a layer's FLOPs get
    peak_tflops: float | None = Field(default=None, gt=0, le=1e6)  # the datasheet's, at the precision, if unset
    memory_gb: float | None = Field(default=None, gt=0, le=1e6)  # the datasheet's if unset

    _lower_name = field_validator("name", mode="before")(_lower)

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in GPUS:
            raise ValueError(f"unknown device {name!r}; known: {', '.join(GPUS)}")
        return name

    def gpu(self) -> Gpu:
        return GPUS[self.name]

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """Editors accept the device's name alone too (`device: h100`)."""
        return {"anyOf": [{"type": "string", "enum": list(GPUS)}, handler(core_schema)]}


class LlmWorkload(WorkloadSection):
    description: ClassVar[str] = ("large-model training: a transformer split by tensor, pipeline and data "
                                  "parallelism (docs/large-models.md)")
    kind: Literal["llm"]
    model: LlmModel  # the transformer: a preset and/or its shape (below)
    parallel: LlmParallelism  # how it is split over the GPUs (below)
    precision: Precision = "bf16"  # of the weights, activations and the matrix multiplies (fp8: the multiplies)
    # of the gradients the replicas reduce; default fp32 with bf16 or fp8 (Megatron accumulates and
    # reduces them in fp32), else the precision's
    gradient_precision: Literal["fp32", "fp16", "bf16"] | None = None
    # activations recomputed in the backward pass instead of kept: none; selective (the attention's
    # softmax part, Korthikanti et al. 2022); full (each layer's forward again, its all-reduces too)
    recompute: Literal["none", "selective", "full"] = "none"
    device: LlmDevice = LlmDevice(name="h100")  # the GPU, by name or as a section (below)

    # long iterations reuse every connection many times: one unmeasured iteration is enough
    default_warmups: ClassVar[int] = 1
    max_hosts: ClassVar[int] = MAX_HOSTS  # one replica simulated for all, or the closed form

    _lower_fields = field_validator("precision", "gradient_precision", "recompute", mode="before")(_lower)

    @field_validator("device", mode="before")
    @classmethod
    def _device_by_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _splits(self) -> "LlmWorkload":
        shape, par = self.model.architecture(), self.parallel
        chunks = par.pp * par.virtual_stages
        if shape.layers % chunks:
            raise ValueError(f"model.layers ({shape.layers}) must be a multiple of parallel.pp × virtual_stages "
                             f"({chunks}): each stage runs as many layers")
        for name, size in (("heads", shape.heads), ("kv_heads", shape.kv_heads), ("ffn_hidden", shape.ffn_hidden)):
            if size % par.tp:
                raise ValueError(f"model.{name} ({size}) must be a multiple of parallel.tp ({par.tp}): "
                                 f"tensor parallelism splits them evenly")
        if par.sequence_parallel and shape.seq_len % par.tp:
            raise ValueError(f"model.seq_len ({shape.seq_len}) must be a multiple of parallel.tp ({par.tp}) "
                             f"with sequence_parallel")
        if par.ep > 1 and not shape.experts:
            raise ValueError(f"parallel.ep ({par.ep}) needs a model with experts (model.experts)")
        if shape.experts and shape.experts % par.ep:
            raise ValueError(f"model.experts ({shape.experts}) must be a multiple of parallel.ep ({par.ep}): "
                             f"each GPU of an expert-parallel group holds as many")
        if (par.tp * par.dp) % par.ep:
            raise ValueError(f"parallel.ep ({par.ep}) must divide tp × dp ({par.tp * par.dp}): expert-parallel "
                             f"groups are cut from each stage's GPUs")
        if shape.experts and par.tp > 1 and not par.sequence_parallel:
            raise ValueError("a model with experts and tp > 1 needs sequence_parallel: true (as Megatron-LM "
                             "requires: each tensor-parallel rank routes its own share of the tokens)")
        if self.precision not in self.device.gpu().peak_tflops and self.device.peak_tflops is None:
            raise ValueError(f"a {self.device.name} has no {self.precision} tensor cores; use "
                             f"{' or '.join(self.device.gpu().peak_tflops)}, or set device.peak_tflops")
        return self

    def fits(self, hosts: int, whose: str) -> None:
        super().fits(hosts, whose)
        par = self.parallel
        if par.gpus() != hosts:
            raise ValueError(f"workload.parallel tp×pp×dp = {par.tp}×{par.pp}×{par.dp} = {par.gpus()} "
                             f"must equal {whose}")

    def grad_precision(self) -> str:
        if self.gradient_precision is not None:
            return self.gradient_precision
        return "fp32" if self.precision in ("bf16", "fp8") else self.precision

    def peak_flops(self) -> float:
        """FLOP/s a GPU's matrix multiplies get: the peak at the precision times the efficiency."""
        peak = self.device.peak_tflops or self.device.gpu().peak_tflops[self.precision]
        return peak * 1e12 * self.device.efficiency

    def memory_bytes(self) -> float:
        return (self.device.memory_gb or self.device.gpu().memory_gb) * 1e9

    def describe(self) -> str:
        par = self.parallel
        return (f"{self.model.name()}: tp {par.tp} × pp {par.pp} × dp {par.dp}"
                + (f" (ep {par.ep})" if par.ep > 1 else "") + f", {par.micro_batches()} micro-batches "
                f"of {par.micro_batch}, {par.schedule}, {self.precision} on {self.device.name}"
                + (", gradients summed by INA" if par.dp_algorithm == "ina" else ""))



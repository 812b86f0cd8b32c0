"""Model zoo: ResNet-50, a 350 M-parameter Transformer and an 18 B GPT, as forward+backward op graphs.

Quantities are per training sample in mixed precision (fp16 activations and weights, 2 bytes per
element). An op's kind decides how it is split (`balance`) and how it is timed (`profiles`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

BYTES_PER_ELEMENT = 2  # fp16
GRADIENT_BYTES = {"fp16": 2, "fp32": 4}  # per parameter, what a DP all-reduce moves at each precision
PARAMETRIC_KINDS = frozenset({"conv", "linear", "embedding"})


@dataclass(frozen=True)
class Op:
    name: str
    kind: str  # conv | linear | embedding | attention | norm | elementwise | pool | loss
    flops_per_sample: float
    out_bytes_per_sample: float
    param_bytes: float = 0.0
    deps: tuple[str, ...] = ()
    backward: bool = False
    max_parts: int = 1 << 30  # how finely the split dimension can be cut
    # Measured time per sample (µs), from a user profile; overrides the FLOP-based estimate.
    compute_us_per_sample: float | None = None
    # Measured (batch, µs) points of the op's time over the batch, from a user profile: SiP-ML's
    # profile along the sample dimension (§4.2); the time at a batch comes from this curve.
    compute_us_by_batch: tuple[tuple[float, float], ...] = ()
    # False under activation checkpointing: the output is recomputed in backward, not kept.
    keeps_activation: bool = True
    # Spatial extent: the output's rows (image height; 0: not cut by rows) and, for a spatial split,
    # the input rows each part needs beyond its own on either side (a k×k kernel: k // 2).
    rows: int = 0
    halo_rows: int = 0

    @property
    def parametric(self) -> bool:
        return self.kind in PARAMETRIC_KINDS


@dataclass(frozen=True)
class ModelGraph:
    name: str
    ops: tuple[Op, ...]  # topologically ordered: forward ops, then backward ops
    notes: tuple[str, ...] = field(default=())

    @property
    def parameters(self) -> float:
        return sum(op.param_bytes for op in self.ops if not op.backward) / BYTES_PER_ELEMENT

    @property
    def param_bytes(self) -> float:
        return sum(op.param_bytes for op in self.ops if not op.backward)

    @cached_property
    def _by_name(self) -> dict[str, Op]:
        return {o.name: o for o in self.ops}

    def op(self, name: str) -> Op:
        return self._by_name[name]


class _Builder:
    """Collects forward ops and derives the backward pass (gradients flow along reversed edges)."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def add(self, name: str, kind: str, flops: float, out_elements: float, params: float = 0.0,
            deps: tuple[str, ...] = (), max_parts: int = 1 << 30, rows: int = 0, halo_rows: int = 0) -> str:
        self.ops.append(Op(name, kind, flops, out_elements * BYTES_PER_ELEMENT, params * BYTES_PER_ELEMENT,
                           deps, max_parts=max_parts, rows=rows, halo_rows=halo_rows))
        return name

    def build(self, model: str, notes: tuple[str, ...] = ()) -> ModelGraph:
        forward = list(self.ops)
        by_name = {op.name: op for op in forward}
        children: dict[str, list[str]] = {op.name: [] for op in forward}
        for op in forward:
            for dep in op.deps:
                children[dep].append(op.name)
        backward = []
        for op in reversed(forward):
            # Gradient w.r.t. the input has the input's size; weight gradients double the FLOPs.
            # It is cut as its forward op is, and its output has the input's rows.
            widest = max((by_name[d] for d in op.deps), key=lambda d: d.out_bytes_per_sample, default=op)
            factor = 2.0 if op.parametric else 1.0
            deps = tuple(f"{c}.bwd" for c in children[op.name]) + (op.name,)
            backward.append(Op(f"{op.name}.bwd", op.kind, factor * op.flops_per_sample, widest.out_bytes_per_sample,
                               op.param_bytes, deps, backward=True, max_parts=op.max_parts, rows=widest.rows,
                               halo_rows=op.halo_rows))
        return ModelGraph(model, tuple(forward + backward), notes)


def resnet50() -> ModelGraph:
    """ResNet-50 on 224×224 images: 25.6 M parameters, ~4.1 G multiply-adds forward per image."""
    b = _Builder()
    h = w = 112
    prev = b.add("conv1", "conv", 2 * h * w * 64 * 7 * 7 * 3, h * w * 64, 7 * 7 * 3 * 64, (), 64, h, 3)
    h = w = 56
    prev = b.add("pool1", "pool", h * w * 64 * 9, h * w * 64, 0, (prev,), rows=h, halo_rows=1)
    channels = 64
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512)), start=1):
        for block in range(blocks):
            stride = 2 if block == 0 and stage > 1 else 1
            oh, ow = h // stride, w // stride
            tag = f"s{stage}b{block}"
            a = b.add(f"{tag}.conv1", "conv", 2 * h * w * channels * width, h * w * width, channels * width,
                      (prev,), width, h)
            c = b.add(f"{tag}.conv2", "conv", 2 * oh * ow * width * width * 9, oh * ow * width, 9 * width * width,
                      (a,), width, oh, 1)
            d = b.add(f"{tag}.conv3", "conv", 2 * oh * ow * width * 4 * width, oh * ow * 4 * width,
                      width * 4 * width, (c,), 4 * width, oh)
            shortcut = prev
            if block == 0:
                shortcut = b.add(f"{tag}.down", "conv", 2 * oh * ow * channels * 4 * width, oh * ow * 4 * width,
                                 channels * 4 * width, (prev,), 4 * width, oh)
            prev = b.add(f"{tag}.add", "elementwise", oh * ow * 4 * width, oh * ow * 4 * width, 0, (d, shortcut),
                         rows=oh)
            channels, h, w = 4 * width, oh, ow
    prev = b.add("avgpool", "pool", h * w * channels, channels, 0, (prev,))
    prev = b.add("fc", "linear", 2 * channels * 1000, 1000, channels * 1000 + 1000, (prev,), 1000)
    b.add("loss", "loss", 5 * 1000, 1, 0, (prev,))
    return b.build("resnet50", ("He et al. 2016; conv+BN+ReLU folded into one op",))


def _transformer(name: str, layers: int, d_model: int, heads: int, seq: int, vocab: int, note: str) -> ModelGraph:
    b = _Builder()
    tokens = seq
    prev = b.add("embed", "embedding", tokens * d_model, tokens * d_model, vocab * d_model + seq * d_model, (),
                 d_model)
    for layer in range(layers):
        t = f"l{layer}"
        ln1 = b.add(f"{t}.ln1", "norm", 8 * tokens * d_model, tokens * d_model, 2 * d_model, (prev,))
        qkv = b.add(f"{t}.qkv", "linear", 2 * tokens * d_model * 3 * d_model, tokens * 3 * d_model,
                    3 * d_model * d_model + 3 * d_model, (ln1,), 3 * d_model)
        att = b.add(f"{t}.attn", "attention", 4 * seq * seq * d_model + 5 * heads * seq * seq, tokens * d_model, 0,
                    (qkv,), heads)
        proj = b.add(f"{t}.proj", "linear", 2 * tokens * d_model * d_model, tokens * d_model,
                     d_model * d_model + d_model, (att,), d_model)
        add1 = b.add(f"{t}.add1", "elementwise", tokens * d_model, tokens * d_model, 0, (proj, prev))
        ln2 = b.add(f"{t}.ln2", "norm", 8 * tokens * d_model, tokens * d_model, 2 * d_model, (add1,))
        ff1 = b.add(f"{t}.ffn1", "linear", 2 * tokens * d_model * 4 * d_model, tokens * 4 * d_model,
                    4 * d_model * d_model + 4 * d_model, (ln2,), 4 * d_model)
        gelu = b.add(f"{t}.gelu", "elementwise", 8 * tokens * 4 * d_model, tokens * 4 * d_model, 0, (ff1,))
        ff2 = b.add(f"{t}.ffn2", "linear", 2 * tokens * 4 * d_model * d_model, tokens * d_model,
                    4 * d_model * d_model + d_model, (gelu,), d_model)
        prev = b.add(f"{t}.add2", "elementwise", tokens * d_model, tokens * d_model, 0, (ff2, add1))
    lnf = b.add("ln_f", "norm", 8 * tokens * d_model, tokens * d_model, 2 * d_model, (prev,))
    # Output projection shares the embedding's weights, so it adds FLOPs but no parameters.
    head = b.add("head", "linear", 2 * tokens * d_model * vocab, tokens * vocab, 0, (lnf,), vocab)
    b.add("loss", "loss", 5 * tokens * vocab, 1, 0, (head,))
    return b.build(name, (note,))


def transformer() -> ModelGraph:
    """BERT-large-sized Transformer: 24 layers, d=1024, 16 heads, 512 tokens: ~335 M parameters."""
    return _transformer("transformer", 24, 1024, 16, 512, 30522, "Vaswani et al. 2017 layer; BERT-large sizes")


def megatron() -> ModelGraph:
    """GPT/Megatron-like: 40 layers, d=6144, 48 heads, 2048 tokens: ~18.4 B parameters.

    Trained, as Megatron-LM is, with activation checkpointing: only the inputs of each attention and
    MLP block (the layer norms' outputs) are kept for the backward pass; the rest is recomputed."""
    graph = _transformer("megatron", 40, 6144, 48, 2048, 51200, "Shoeybi et al. 2019 GPT layer; 18 B configuration; "
                         "activation checkpointing")
    ops = tuple(op if op.backward or op.kind == "norm" else replace(op, keeps_activation=False) for op in graph.ops)
    return ModelGraph(graph.name, ops, graph.notes)


MODELS = {"resnet50": resnet50, "transformer": transformer, "megatron": megatron}

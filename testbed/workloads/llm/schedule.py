"""A large model's iteration as per-GPU steps (pure), as Megatron-LM runs it: each stage's passes
in its pipeline schedule's order; in every layer the tensor-parallel all-reduces (or reduce-scatters
and all-gathers) between its computes; activations and gradients sent between stages; and the
data-parallel gradient reduction in buckets beside the backward pass. Step ids start with the
parallelism whose traffic they are (tp., pp., dp.), which traffic.py counts by."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from testbed.model.schedule import (
    CollectiveStep,
    ComputeStep,
    GpuSchedule,
    RecvStep,
    Schedule,
    SendStep,
    Step,
    in_order_deps,
    with_channels,
)
from testbed.shared.collective_plans import schedule_traffic
from testbed.workloads.llm.moe import ExpertGroups, expert_groups, layer_tokens_to
from testbed.workloads.llm.pipeline import Pass, at_virtual_stage, stage_passes, virtual_stage
from testbed.workloads.llm.section import LlmWorkload
from testbed.workloads.llm.shape import Layers, element_bytes, gradient_bytes

# Megatron-LM's default gradient bucket: max(40 M, 1 M × dp) parameters.
BUCKET_PARAMS, BUCKET_PARAMS_PER_REPLICA = 40_000_000, 1_000_000


@dataclass(frozen=True)
class Layout:
    """Where each (tp, dp, pp) index sits among the ranks: `order` names the fastest-varying first."""

    tp: int
    dp: int
    pp: int
    order: tuple[str, ...] = ("tp", "dp", "pp")

    def rank(self, t: int, d: int, p: int) -> int:
        index, sizes = {"tp": t, "dp": d, "pp": p}, {"tp": self.tp, "dp": self.dp, "pp": self.pp}
        rank, stride = 0, 1
        for name in self.order:
            rank += index[name] * stride
            stride *= sizes[name]
        return rank

    def coordinates(self, rank: int) -> tuple[int, int, int]:
        """(t, d, p) of `rank`."""
        sizes = {"tp": self.tp, "dp": self.dp, "pp": self.pp}
        found = {}
        for name in self.order:
            rank, found[name] = divmod(rank, sizes[name])
        return found["tp"], found["dp"], found["pp"]

    def tp_group(self, d: int, p: int) -> tuple[int, ...]:
        return tuple(self.rank(t, d, p) for t in range(self.tp))

    def dp_group(self, t: int, p: int) -> tuple[int, ...]:
        return tuple(self.rank(t, d, p) for d in range(self.dp))

    def stage_ranks(self, p: int) -> list[int]:
        """Every GPU of stage p (its tp × dp ranks)."""
        return [self.rank(t, d, p) for t in range(self.tp) for d in range(self.dp)]


def layout_of(workload: LlmWorkload) -> Layout:
    par = workload.parallel
    return Layout(par.tp, par.dp, par.pp, tuple(name for name in par.order.split("-") if name != "ep"))


@dataclass
class _Chain:
    """One GPU's steps in the order it runs them; consecutive computes merge unless one closes a
    gradient bucket (whose reduction starts when it ends)."""

    steps: list[Step] = field(default_factory=list)
    closed: set[str] = field(default_factory=set)

    def compute(self, ident: str, flops: float, flop_rate: float, closes_bucket: bool = False) -> str | None:
        us = flops / flop_rate * 1e6
        last = self.steps[-1] if self.steps else None
        if isinstance(last, ComputeStep) and last.id not in self.closed:
            self.steps[-1] = replace(last, compute_us=last.compute_us + us)
            ident = last.id
        elif us > 0:
            self.steps.append(ComputeStep(ident, us))
        else:
            return None
        if closes_bucket:
            self.closed.add(ident)
        return ident

    def add(self, step: Step) -> None:
        self.steps.append(step)


@dataclass(frozen=True)
class _Stage:
    """What one GPU computes and sends: its stage's layers as chunks, and the model's constants."""

    workload: LlmWorkload
    layout: Layout
    t: int
    d: int
    p: int

    @property
    def layers(self) -> Layers:
        par = self.workload.parallel
        return Layers(self.workload.model.architecture(), par.tp, par.micro_batch)

    def chunk_layers(self) -> int:
        par = self.workload.parallel
        return self.layers.arch.layers // (par.pp * par.virtual_stages)

    def vstages(self) -> int:
        return self.workload.parallel.pp * self.workload.parallel.virtual_stages

    def peer(self, index: int) -> int:
        return self.layout.rank(self.t, self.d, at_virtual_stage(index, self.workload.parallel.pp)[0])

    @property
    def experts(self) -> ExpertGroups:
        return expert_groups(self.layout.stage_ranks(self.p), self.layout.rank(self.t, self.d, self.p),
                             self.workload.parallel.ep)

    def tokens_to(self, layer: int) -> tuple[int, ...]:
        return layer_tokens_to(self.workload, layer)


def _tp(chain: _Chain, stage: _Stage, ident: str, ops: Sequence[str]) -> None:
    """Tensor-parallel collectives of one activation-sized buffer over the stage's tp group."""
    if stage.workload.parallel.tp == 1:
        return
    group = stage.layout.tp_group(stage.d, stage.p)
    size = stage.layers.activation_bytes(stage.workload.precision)
    for op in ops:
        chain.add(CollectiveStep(f"tp.{ident}.{op}", op, "ring", group, size))


def _all_to_all(chain: _Chain, stage: _Stage, ident: str, send: Sequence[int], recv: Sequence[int],
                beside: Callable[[], None] | None = None) -> None:
    """One all-to-all(-v) over the expert-parallel group as a send to and a receive from each other
    member (NCCL's grouped send/recv): `send[j]` and `recv[j]` tokens of hidden-size activations
    to and from the group's j-th GPU; `beside` adds the steps that run while they move."""
    groups = stage.experts
    token_bytes = stage.layers.arch.hidden * element_bytes(stage.workload.precision)
    tag = f"e{ident}"
    last = (chain.steps[-1].id,) if chain.steps else ()
    for j, peer in enumerate(groups.ep_group):
        if j != groups.position and send[j]:
            chain.add(SendStep(f"ep.{ident}.s{j}", peer, send[j] * token_bytes, tag, deps=last))
    if beside is not None:
        beside()
    for j, peer in enumerate(groups.ep_group):
        if j != groups.position and recv[j]:
            chain.add(RecvStep(f"ep.{ident}.r{j}", peer, recv[j] * token_bytes, tag))


def _moe_forward(chain: _Chain, stage: _Stage, ident: str, layer: int, rate: float) -> None:
    """An MoE layer's MLP: the router, the tokens dispatched to their experts' GPUs (the shared
    experts computing meanwhile), the experts over what arrived, the results combined back."""
    layers, groups = stage.layers, stage.experts
    to = stage.tokens_to(layer)
    mine = to[groups.position]  # from every GPU of the group, this many pairs for this GPU's experts
    chain.compute(f"{ident}.router", layers.router_forward_flops(), rate)
    _all_to_all(chain, stage, f"{ident}.dispatch", to, [mine] * len(to), lambda: _shared(chain, stage, ident, 1, rate))
    chain.compute(f"{ident}.experts", layers.expert_forward_flops(mine * len(to)), rate)
    _all_to_all(chain, stage, f"{ident}.combine", [mine] * len(to), to)


def _moe_backward(chain: _Chain, stage: _Stage, ident: str, layer: int, rate: float) -> None:
    """The forward's all-to-alls in reverse: the outputs' gradients to the experts, the experts'
    backward, the inputs' gradients back to the tokens' GPUs."""
    layers, groups = stage.layers, stage.experts
    to = stage.tokens_to(layer)
    mine = to[groups.position]
    _all_to_all(chain, stage, f"{ident}.combine", to, [mine] * len(to), lambda: _shared(chain, stage, ident, 2, rate))
    chain.compute(f"{ident}.experts", 2 * layers.expert_forward_flops(mine * len(to)), rate)
    _all_to_all(chain, stage, f"{ident}.dispatch", [mine] * len(to), to)
    chain.compute(f"{ident}.router", 2 * layers.router_forward_flops(), rate)


def _shared(chain: _Chain, stage: _Stage, ident: str, passes: int, rate: float) -> None:
    """Shared experts: a tensor-parallel MLP over the whole sequence (gathered and scattered back)."""
    if not stage.layers.arch.shared_experts:
        return
    _tp(chain, stage, f"{ident}.shared.in", ["allgather"])
    chain.compute(f"{ident}.shared", passes * stage.layers.shared_forward_flops(), rate)
    _tp(chain, stage, f"{ident}.shared.out", ["reducescatter"])


def _forward_layer(chain: _Chain, stage: _Stage, ident: str, rate: float, layer: int) -> None:
    sp, layers = stage.workload.parallel.sequence_parallel, stage.layers
    before, after = (["allgather"], ["reducescatter"]) if sp else ([], ["allreduce"])
    _tp(chain, stage, f"{ident}.attn.in", before)
    chain.compute(f"{ident}.attn", layers.attention_forward_flops(), rate)
    _tp(chain, stage, f"{ident}.attn.out", after)
    if layers.arch.is_moe(layer):
        _moe_forward(chain, stage, ident, layer, rate)
        return
    _tp(chain, stage, f"{ident}.mlp.in", before)
    chain.compute(f"{ident}.mlp", layers.mlp_forward_flops(), rate)
    _tp(chain, stage, f"{ident}.mlp.out", after)


def _backward_layer(chain: _Chain, stage: _Stage, ident: str, rate: float, closes_bucket: bool,
                    layer: int) -> str | None:
    """A layer's backward pass (its forward again first under full recomputation); the id of the
    compute that finishes its weight gradients."""
    workload, layers = stage.workload, stage.layers
    if workload.recompute == "full":
        _forward_layer(chain, stage, f"R{ident}", rate, layer)
    sp = workload.parallel.sequence_parallel
    # an all-gather's backward is a reduce-scatter and the reverse; an all-reduce's backward is the
    # identity and the identity's (the column-parallel input's) an all-reduce
    before, after = (["allgather"], ["reducescatter"]) if sp else ([], ["allreduce"])
    if layers.arch.is_moe(layer):
        _moe_backward(chain, stage, f"B{ident}", layer, rate)
    else:
        _tp(chain, stage, f"B{ident}.mlp.in", before)
        chain.compute(f"B{ident}.mlp", 2 * layers.mlp_forward_flops(), rate)
        _tp(chain, stage, f"B{ident}.mlp.out", after)
    _tp(chain, stage, f"B{ident}.attn.in", before)
    core = layers.attention_core_flops() if workload.recompute == "selective" else 0.0
    done = chain.compute(f"B{ident}.attn", 2 * layers.attention_forward_flops() + core, rate, closes_bucket)
    _tp(chain, stage, f"B{ident}.attn.out", after)
    return done


def _pass(chain: _Chain, stage: _Stage, step: Pass, rate: float, closing: set[tuple[int, int]],
          finished: dict[tuple[int, int], str]) -> None:
    """One forward or backward pass of a micro-batch through one chunk, with its pipeline messages."""
    workload, layers = stage.workload, stage.layers
    par = workload.parallel
    index = virtual_stage(stage.p, step.chunk, par.pp)
    first, last = index == 0, index == stage.vstages() - 1
    sp = par.sequence_parallel
    message = layers.activation_bytes(workload.precision) // (par.tp if sp else 1)
    per_chunk = stage.chunk_layers()
    base = index * per_chunk
    name = f"{step.micro}.{step.chunk}"
    if step.phase == "F":
        if not first:
            tag = f"a{step.micro}.{index - 1}"
            chain.add(RecvStep(f"pp.r{tag}", stage.peer(index - 1), message, tag))
        else:
            _tp(chain, stage, f"F{name}.embed", ["reducescatter" if sp else "allreduce"])
        for layer in range(base, base + per_chunk):
            _forward_layer(chain, stage, f"F{step.micro}.{layer}", rate, layer)
        if last:
            _tp(chain, stage, f"F{name}.head.in", ["allgather"] if sp else [])
            chain.compute(f"F{name}.head", layers.head_forward_flops(), rate)
        else:
            tag = f"a{step.micro}.{index}"
            chain.add(SendStep(f"pp.s{tag}", stage.peer(index + 1), message, tag, deps=(chain.steps[-1].id,)))
        return
    if not last:
        tag = f"g{step.micro}.{index + 1}"
        chain.add(RecvStep(f"pp.r{tag}", stage.peer(index + 1), message, tag))
    else:
        chain.compute(f"B{name}.head", 2 * layers.head_forward_flops(), rate)
        _tp(chain, stage, f"B{name}.head.in", ["reducescatter" if sp else "allreduce"])
    for layer in reversed(range(base, base + per_chunk)):
        ident = f"{step.micro}.{layer}"
        done = _backward_layer(chain, stage, ident, rate, (step.chunk, layer) in closing, layer)
        if done is not None and (step.chunk, layer) in closing:
            finished[(step.chunk, layer)] = done
    if not first:
        tag = f"g{step.micro}.{index}"
        chain.add(SendStep(f"pp.s{tag}", stage.peer(index - 1), message, tag, deps=(chain.steps[-1].id,)))
    else:  # the embedding's reduce-scatter (sequence parallelism) has an all-gather for its backward
        _tp(chain, stage, f"B{name}.embed", ["allgather"] if sp else [])


@dataclass(frozen=True)
class Bucket:
    """Gradients reduced together: the layers (chunk, layer) whose final backward fills them."""

    layers: tuple[tuple[int, int], ...]
    params: int


def gradient_buckets(workload: LlmWorkload, p: int, passes: Sequence[Pass], experts: bool = False) -> list[Bucket]:
    """Stage `p`'s gradients in the order its last micro-batches' backward passes finish them
    (each chunk's layers last to first; the output layer's with its chunk's last layer, the
    embedding's with the first layer), cut into buckets of the bucket size: the weights every
    replica holds, or (`experts`) the routed experts' a GPU holds (reduced over their own group)."""
    par = workload.parallel
    layers = Layers(workload.model.architecture(), par.tp, par.micro_batch)
    per_chunk = layers.arch.layers // (par.pp * par.virtual_stages)
    final = {pass_.chunk: k for k, pass_ in enumerate(passes) if pass_.phase == "B"}
    ready: list[tuple[tuple[int, int], int]] = []
    for chunk in sorted(final, key=final.__getitem__):
        index = virtual_stage(p, chunk, par.pp)
        for layer in reversed(range(index * per_chunk, (index + 1) * per_chunk)):
            if experts:
                if layers.arch.is_moe(layer):
                    ready.append(((chunk, layer), layers.routed_params(layer) // par.ep))
                continue
            params = layers.dense_params(layer)
            if layer == layers.arch.layers - 1 and not (layers.arch.tied_embeddings and par.pp == 1):
                params += layers.embedding_params()  # the output layer
            if layer == 0:
                params += layers.embedding_params()
            ready.append(((chunk, layer), params // par.tp))
    grad = gradient_bytes(workload.grad_precision())
    limit = par.dp_bucket_bytes or max(BUCKET_PARAMS, BUCKET_PARAMS_PER_REPLICA * par.dp) * grad
    buckets: list[Bucket] = []
    current: list[tuple[int, int]] = []
    params = 0
    for key, size in ready:
        current.append(key)
        params += size
        if params * grad >= limit:
            buckets.append(Bucket(tuple(current), params))
            current, params = [], 0
    if current:
        buckets.append(Bucket(tuple(current), params))
    return buckets


def _side_steps(workload: LlmWorkload, stage: _Stage, buckets: list[Bucket], expert_buckets: list[Bucket],
                finished: dict[tuple[int, int], str], order: Sequence[tuple[int, int]]) -> list[CollectiveStep]:
    """The data-parallel reduction, one bucket at a time as each fills (one communication stream),
    the experts' buckets over their own data-parallel group among them in the order they fill
    (`order`: the layers' in the order their gradients finish); the tied embedding's all-reduce
    between the first and last stage; then, with a distributed optimizer, the updated parameters'
    all-gather."""
    par, layout = workload.parallel, stage.layout
    grad, param = gradient_bytes(workload.grad_precision()), element_bytes(workload.precision)
    out: list[CollectiveStep] = []
    previous: tuple[str, ...] = ()
    queue: list[tuple[int, str, tuple[int, ...], Bucket]] = []
    if par.dp > 1:
        queue += [(order.index(bucket.layers[-1]), f"dp.bucket{b}", layout.dp_group(stage.t, stage.p), bucket)
                  for b, bucket in enumerate(buckets)]
    expert_dp = stage.experts.expert_dp_group
    if len(expert_dp) > 1:
        queue += [(order.index(bucket.layers[-1]), f"dp.experts{b}", expert_dp, bucket)
                  for b, bucket in enumerate(expert_buckets)]
    op = "reducescatter" if par.zero else "allreduce"
    for _, name, group, bucket in sorted(queue, key=lambda item: item[0]):
        ident = f"{name}.{'rs' if par.zero else 'ar'}"
        algorithm = par.dp_algorithm if name.startswith("dp.bucket") else "ring"
        out.append(CollectiveStep(ident, op, algorithm, group, bucket.params * grad,
                                  deps=(finished[bucket.layers[-1]], *previous)))
        previous = (ident,)
    if stage.layers.arch.tied_embeddings and par.pp > 1 and stage.p in (0, par.pp - 1):
        group = (layout.rank(stage.t, stage.d, 0), layout.rank(stage.t, stage.d, par.pp - 1))
        last = finished[buckets[-1].layers[-1]] if not previous else previous[0]
        out.append(CollectiveStep("pp.embedding.ar", "allreduce", "ring", group,
                                  stage.layers.embedding_params() // par.tp * grad, deps=(last,)))
        previous = ("pp.embedding.ar",)
    if par.zero:
        for _, name, group, bucket in sorted(queue, key=lambda item: item[0]):
            ident = f"{name}.ag"
            out.append(CollectiveStep(ident, "allgather", "ring", group, bucket.params * param, deps=previous))
            previous = (ident,)
    return out


def _chained(steps: list[Step]) -> tuple[Step, ...]:
    """A GPU's passes as DAG steps that keep their order: each waits for the last blocking one before it."""
    order = in_order_deps([(s.id, s.kind, s.deps) for s in steps])
    return tuple(replace(s, deps=data + ctrl) for s, (data, ctrl) in zip(steps, order))


def llm_schedule(workload: LlmWorkload, hosts: int, name: str, first_replica_only: bool = False) -> Schedule:
    """Every GPU's steps for one iteration: in order where nothing runs beside the passes, else a
    DAG whose gradient reductions run beside the backward compute. `first_replica_only` (without
    expert parallelism): the first data-parallel replica's GPUs alone, what
    testbed.oracle.replicas simulates for all of them; no traffic matrix."""
    par = workload.parallel
    layout = layout_of(workload)
    rate = workload.peak_flops()
    # Without expert parallelism, a data-parallel replica's GPU runs the first replica's
    # counterpart's steps with its own peers: each is made once and copied.
    copied = par.ep == 1 and par.dp > 1
    chains: dict[int, tuple[list[Step], list[CollectiveStep]]] = {}
    for rank in range(hosts):
        t, d, p = layout.coordinates(rank)
        if copied and d > 0:
            continue
        stage = _Stage(workload, layout, t, d, p)
        passes = stage_passes(par.schedule, par.pp, p, par.micro_batches(), par.virtual_stages)
        buckets = gradient_buckets(workload, p, passes)
        expert_buckets = gradient_buckets(workload, p, passes, experts=True)
        final = {pass_.chunk: k for k, pass_ in enumerate(passes) if pass_.phase == "B"}
        closing = {bucket.layers[-1] for bucket in buckets + expert_buckets}
        chain = _Chain()
        finished: dict[tuple[int, int], str] = {}
        for k, pass_ in enumerate(passes):
            _pass(chain, stage, pass_, rate, closing if final[pass_.chunk] == k else set(), finished)
        order = [key for bucket in buckets for key in bucket.layers]
        chains[rank] = (chain.steps, _side_steps(workload, stage, buckets, expert_buckets, finished, order))
    dag = any(side for _, side in chains.values())
    made = {rank: (_chained(steps) + tuple(side)) if dag else tuple(steps) for rank, (steps, side) in chains.items()}
    if copied and not first_replica_only:
        first = sorted(made)
        for d in range(1, par.dp):
            to = {rank: layout.rank(t, d, p) for rank in first for t, _, p in (layout.coordinates(rank),)}
            made.update((to[rank], tuple(_moved(step, to) for step in made[rank])) for rank in first)
    gpus: tuple[GpuSchedule, ...] = tuple(GpuSchedule(rank, made[rank]) for rank in sorted(made))
    if dag:
        gpus = with_channels(gpus)
    matrix = () if first_replica_only else schedule_traffic(gpus, hosts)
    return Schedule(name=name, hosts=hosts, iterations=workload.iterations, gpus=gpus,
                    traffic_matrix_bytes=matrix, execution="dag" if dag else "in-order")


def _moved(step: Step, to: dict[int, int]) -> Step:
    """The first replica's step as another replica's GPU runs it (`to`: its GPUs' counterparts):
    peers and groups within the replica moved, groups across replicas (data parallelism) kept."""
    if isinstance(step, (SendStep, RecvStep)):
        return step.with_peer(to[step.peer])
    if isinstance(step, CollectiveStep) and all(member in to for member in step.group):
        return replace(step, group=tuple(to[member] for member in step.group))
    return step

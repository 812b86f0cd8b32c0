"""SimAI/AICB text workload files (pure but for reading the file) as our schedule, with SimAI's
semantics (its astra-sim Workload.cc): a header line naming the parallelism and its groups, a line
count, then per layer its forward, input-gradient and weight-gradient compute (ns) and collective
(type and bytes). The forward and input-gradient collectives run in the tensor-parallel group (ids
tp.), the weight gradients' in the data-parallel group (dp.). Forward: each layer's compute, then
its collective, waited for. Backward, last layer first: input-gradient compute and collective
(waited for), weight-gradient compute and its collective, started and not waited for (one after
another, beside the backward pass). MICRO: each line's collective over every GPU. Collectives
SimAI does not parse (BROADCAST) move nothing, as there; they are counted and reported."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from testbed.model.errors import InputError
from testbed.model.input_files import read_text
from testbed.model.limits import MAX_COLLECTIVE_BYTES
from testbed.model.schedule import (
    CollectiveStep,
    ComputeStep,
    GpuSchedule,
    Schedule,
    Step,
    in_order_deps,
    with_channels,
)
from testbed.shared.collective_plans import schedule_traffic

MAX_FILE_BYTES = 20_000_000  # AICB's largest model files are a few hundred KB
MAX_COMPUTE_NS = 3_600_000_000_000  # an hour
POLICIES = ("MICRO", "DATA", "MODEL", "HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD")
# SimAI's comm types by prefix (ALLREDUCEALLTOALL before ALLREDUCE), and our operation for each
OPS = (("ALLREDUCEALLTOALL", None), ("ALLREDUCE", "allreduce"), ("ALLTOALL", "alltoall"),
       ("ALLGATHER", "allgather"), ("REDUCESCATTER", "reducescatter"))
FIELDS = 12  # id, dependency, then (compute ns, comm type, comm bytes) for fwd, ig, wg, then update time


@dataclass(frozen=True)
class Phase:
    compute_ns: int
    op: str | None  # allreduce, alltoall, allgather, reducescatter; None: no collective
    bytes: int


@dataclass(frozen=True)
class Layer:
    name: str
    forward: Phase
    input_grad: Phase
    weight_grad: Phase


@dataclass(frozen=True)
class SimaiFile:
    policy: str
    tp: int  # model_parallel_NPU_group
    layers: tuple[Layer, ...]
    skipped: tuple[tuple[str, int], ...]  # comm types SimAI does not run, by name


def _number(text: str, where: str, what: str, limit: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{where}: {what} {text!r} is not a whole number") from None
    if not 0 <= value <= limit:
        raise InputError(f"{where}: {what} {value} is outside 0..{limit:,}")
    return value


def _phase(fields: list[str], at: int, where: str, skipped: Counter[str], what: str) -> Phase:
    compute = _number(fields[at], where, f"{what} compute time (ns)", MAX_COMPUTE_NS)
    name, size = fields[at + 1], _number(fields[at + 2], where, f"{what} collective bytes", MAX_COLLECTIVE_BYTES)
    if name == "NONE":
        return Phase(compute, None, 0)
    for prefix, op in OPS:
        if name.startswith(prefix):
            if name != prefix:  # _EP, _DP_EP: expert parallel groups
                raise InputError(f"{where}: {what} collective {name} runs over expert-parallel groups, which "
                                 f"this reader does not lay out yet; files with ep 1 use {prefix}")
            if op is None:
                raise InputError(f"{where}: {what} collective {name} is not modelled; use ALLREDUCE or ALLTOALL")
            return Phase(compute, op, max(1, size))
    skipped[name] += 1  # SimAI parses only the types above: anything else moves nothing there
    return Phase(compute, None, 0)


def read_simai(path: str | Path, given_as: str = "workload.path") -> SimaiFile:
    source = Path(path)
    text = read_text(source, "a SimAI/AICB workload file (a few hundred KB)", MAX_FILE_BYTES, given_as)
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise InputError(f"{given_as}: {source} needs a header line and a line count (an AICB workload file)")
    header = lines[0].split()
    policy = header[0]
    if policy not in POLICIES:
        raise InputError(f"{given_as}: {source} line 1: parallelism {policy!r} is not one this reader runs "
                         f"({', '.join(POLICIES)})")
    options = {header[i].rstrip(":"): header[i + 1] for i in range(1, len(header) - 1) if header[i].endswith(":")}
    where = f"{source} line 1"
    tp = _number(options.get("model_parallel_NPU_group", "1"), where, "model_parallel_NPU_group", 1_000_000) or 1
    for key in ("pp", "ep", "vpp"):
        if _number(options.get(key, "1"), where, key, 1_000_000) > 1:
            raise InputError(f"{where}: {key}: {options[key]}; this reader runs files with pp, ep and vpp 1 "
                             f"(use workload.kind llm for pipelines)")
    for key in ("checkpoints", "checkpoint_initiates"):
        if _number(options.get(key, "0"), where, key, 1_000_000):
            raise InputError(f"{where}: {key}: {options[key]}; forward-in-backward recomputation is not read "
                             f"yet (AICB writes 0)")
    count = _number(lines[1].strip(), f"{source} line 2", "the layer count", 1_000_000)
    if count == 0 or len(lines) - 2 < count:
        raise InputError(f"{source} line 2: {count} layers, but the file has {len(lines) - 2} layer lines")
    skipped: Counter[str] = Counter()
    layers = []
    for number, line in enumerate(lines[2:2 + count], start=3):
        fields = line.split()
        where = f"{source} line {number}"
        if len(fields) != FIELDS:
            raise InputError(f"{where}: {len(fields)} fields where a layer has {FIELDS} (name, dependency, and "
                             f"compute time, collective and bytes for forward, input and weight gradient, update time)")
        layers.append(Layer(fields[0], _phase(fields, 2, where, skipped, "forward"),
                            _phase(fields, 5, where, skipped, "input-gradient"),
                            _phase(fields, 8, where, skipped, "weight-gradient")))
    return SimaiFile(policy, tp, tuple(layers), tuple(sorted(skipped.items())))


def simai_schedule(found: SimaiFile, hosts: int, iterations: int, name: str,
                   given_as: str = "workload.path") -> Schedule:
    """Every GPU's steps: tensor-parallel groups of `tp` consecutive ranks, data-parallel groups of
    the ranks tp apart (MICRO and DATA: every GPU one group for the weight gradients; MODEL: for
    the forward and input gradients)."""
    tp = found.tp
    if found.policy in ("HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD") and hosts % tp:
        raise InputError(f"{given_as}: model_parallel_NPU_group {tp} does not divide fabric.hosts ({hosts})")
    everyone = tuple(range(hosts))
    gpus = []
    for rank in range(hosts):
        if found.policy in ("HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD"):
            base = rank - rank % tp
            model, data = tuple(range(base, base + tp)), tuple(range(rank % tp, hosts, tp))
        else:
            model = data = everyone
        steps: list[Step] = []
        side: list[CollectiveStep] = []

        def compute(ident: str, ns: int) -> None:
            if ns > 0:
                steps.append(ComputeStep(ident, ns / 1000))

        def collective(ident: str, phase: Phase, group: tuple[int, ...]) -> CollectiveStep | None:
            if phase.op is None or len(group) < 2:
                return None
            return CollectiveStep(ident, phase.op, "ring", group, phase.bytes)

        if found.policy == "MICRO":
            for i, layer in enumerate(found.layers):
                step = collective(f"dp.wg{i}", layer.weight_grad, everyone)
                if step is not None:
                    steps.append(step)
        else:
            for i, layer in enumerate(found.layers):
                compute(f"f{i}", layer.forward.compute_ns)
                if (step := collective(f"tp.f{i}", layer.forward, model)) is not None:
                    steps.append(step)
            for i in reversed(range(len(found.layers))):
                layer = found.layers[i]
                compute(f"ig{i}", layer.input_grad.compute_ns)
                if (step := collective(f"tp.ig{i}", layer.input_grad, model)) is not None:
                    steps.append(step)
                compute(f"wg{i}", layer.weight_grad.compute_ns)
                if (step := collective(f"dp.wg{i}", layer.weight_grad, data)) is not None:
                    last = next((s.id for s in reversed(steps)), None)
                    previous = (side[-1].id,) if side else ()
                    side.append(replace(step, deps=((last,) if last else ()) + previous))
        chained = in_order_deps([(s.id, s.kind, s.deps) for s in steps])
        ordered = [replace(s, deps=data_deps + ctrl) for s, (data_deps, ctrl) in zip(steps, chained)]
        gpus.append(GpuSchedule(rank, (*ordered, *side)))
    placed = with_channels(gpus)
    skipped = tuple((f"{name} (SimAI runs no such collective)", count) for name, count in found.skipped)
    return Schedule(name=name, hosts=hosts, iterations=iterations, gpus=placed,
                    traffic_matrix_bytes=schedule_traffic(placed, hosts), execution="dag", skipped_nodes=skipped)

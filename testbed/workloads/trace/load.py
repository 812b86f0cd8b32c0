"""`workload.kind: trace`: a schedule.json written by a user (or kept from an earlier run or
`testbed place`) replayed as-is. Validated strictly: every problem names the file, the GPU and
the step, and says what to fix. Pure."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from testbed.core.messages import Message, MessageBook
from testbed.model.errors import InputError
from testbed.model.input_files import TRACE_BYTES, read_json
from testbed.model.limits import MAX_COLLECTIVE_BYTES, MAX_COMPUTE_US
from testbed.model.schedule import (
    EXECUTIONS,
    SCHEDULE_FORMAT,
    STEP_KINDS,
    CollectiveStep,
    GpuSchedule,
    Schedule,
    Step,
    step_from_json,
    with_channels,
)
from testbed.shared import collective_plans as plans
from testbed.shared.collective_plans import schedule_traffic


def load_trace(path: str | Path, hosts: int, iterations: int, base_dir: Path | None = None,
               given_as: str = "workload.trace") -> Schedule:
    source = Path(path)
    if not source.is_absolute() and base_dir is not None:
        source = base_dir / source
    data = read_json(source, f"a {SCHEDULE_FORMAT} schedule.json", TRACE_BYTES, given_as)
    return schedule_from_json(data, str(source), hosts, iterations)


# A step's largest figures: a terabyte per message and an hour of compute (model/limits.py).
MAX_STEP_COMPUTE_US = MAX_COMPUTE_US


def _field(where: str, step: dict[str, Any], key: str, kind: type, minimum: float | None = None,
           maximum: float | None = None) -> Any:
    value = step.get(key)
    if isinstance(value, bool) or not isinstance(value, kind if kind is not float else (int, float)):
        raise InputError(f"{where}: '{key}' must be {'a number' if kind is float else 'an integer'} (got {value!r})")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{where}: '{key}' must be a finite number (got {value})")
    if minimum is not None and value < minimum:  # type: ignore[operator]  # a number, checked above
        raise InputError(f"{where}: '{key}' must be at least {minimum} (got {value})")
    if maximum is not None and value > maximum:  # type: ignore[operator]  # a number, checked above
        text = str(value)
        got = text if len(text) < 16 else f"a {len(text)}-digit number"
        raise InputError(f"{where}: '{key}' must be at most {maximum:g} (got {got})")
    return value


def schedule_from_json(data: Any, source: str, hosts: int, iterations: int) -> Schedule:
    if not isinstance(data, dict) or data.get("format") != SCHEDULE_FORMAT:
        raise InputError(f"{source}: 'format' must be \"{SCHEDULE_FORMAT}\"")
    gpus = data.get("gpus")
    if not isinstance(gpus, list) or len(gpus) != hosts:
        count = len(gpus) if isinstance(gpus, list) else "no"
        raise InputError(f"{source}: the trace has {count} GPUs but fabric.hosts is {hosts}; make them equal")
    parsed: list[GpuSchedule] = []
    book: MessageBook[str] = MessageBook("tag")
    for rank, gpu in enumerate(gpus):
        if not isinstance(gpu, dict) or not isinstance(gpu.get("steps"), list):
            raise InputError(f"{source}: gpus[{rank}] needs a 'steps' list")
        steps: list[Step] = []
        ids: set[str] = set()
        for index, step in enumerate(gpu["steps"]):
            where = f"{source}: GPU {rank} step {index}"
            if not isinstance(step, dict):
                raise InputError(f"{where}: a step is an object with 'id' and 'kind'")
            step_id, kind = step.get("id"), step.get("kind")
            if not isinstance(step_id, str) or not step_id or step_id in ids:
                raise InputError(f"{where}: 'id' must be a non-empty string unique on this GPU (got {step_id!r})")
            where = f"{source}: GPU {rank} step '{step_id}'"
            if kind not in STEP_KINDS:
                raise InputError(f"{where}: 'kind' must be one of {', '.join(STEP_KINDS)} (got {kind!r})")
            deps = step.get("deps", [])
            if not isinstance(deps, list) or any(not isinstance(d, str) or d not in ids for d in deps):
                raise InputError(f"{where}: 'deps' must list ids of earlier steps on the same GPU")
            fields: dict[str, Any] = {"id": step_id, "kind": kind, "deps": tuple(deps)}
            if kind == "compute":
                fields["compute_us"] = float(_field(where, step, "compute_us", float, 0, MAX_STEP_COMPUTE_US))
            elif kind in ("send", "recv"):
                peer = _field(where, step, "peer", int, 0)
                if peer >= hosts or peer == rank:
                    raise InputError(f"{where}: 'peer' must be another GPU, 0..{hosts - 1} (got {peer})")
                tag = step.get("tag")
                if not isinstance(tag, str) or not tag:
                    raise InputError(f"{where}: 'tag' must be a non-empty string that pairs the send with its recv")
                size = _field(where, step, "bytes", int, 1, MAX_COLLECTIVE_BYTES)
                fields.update(peer=peer, tag=tag, bytes=size)
                message = Message(where, size, (rank, len(steps)))
                if kind == "send":
                    book.send(rank, peer, tag, message)
                else:
                    book.recv(peer, rank, tag, message)
            else:
                op, algorithm = step.get("op"), step.get("algorithm", "ring")
                known = isinstance(op, str) and isinstance(algorithm, str) and plans.supported(op, algorithm)
                if not known or algorithm in plans.SERVICE_ALGORITHMS:
                    raise InputError(f"{where}: collective {op!r} with algorithm {algorithm!r} cannot run in a "
                                     f"trace; use allreduce, reducescatter, allgather, broadcast, alltoall or "
                                     f"sendrecv with ring (tree, halving-doubling for allreduce)")
                group = step.get("group")
                if (not isinstance(group, list) or len(group) < 2 or len(set(group)) != len(group)
                        or any(not isinstance(g, int) or not 0 <= g < hosts for g in group) or rank not in group):
                    raise InputError(f"{where}: 'group' must list 2+ distinct GPUs in 0..{hosts - 1}, "
                                     f"this one included")
                fields.update(op=op, algorithm=algorithm, group=tuple(group),
                              bytes=_field(where, step, "bytes", int, 1, MAX_COLLECTIVE_BYTES))
            ids.add(step_id)
            steps.append(step_from_json(fields))
        parsed.append(GpuSchedule(rank=rank, steps=tuple(steps)))
    book.pairs()  # every send meets its receive, of the same size
    _members_agree(source, parsed)
    execution = data.get("execution", "in-order")
    if execution not in EXECUTIONS:
        raise InputError(f"{source}: 'execution' must be one of {', '.join(EXECUTIONS)} (got {execution!r})")
    gpus = with_channels(parsed) if execution == "dag" else tuple(parsed)
    return Schedule(name=str(data.get("name", Path(source).stem)), hosts=hosts, iterations=iterations,
                    gpus=gpus, traffic_matrix_bytes=schedule_traffic(gpus, hosts), execution=execution)


def _members_agree(source: str, gpus: list[GpuSchedule]) -> None:
    """A trace with steps, whose collectives every member runs alike (the same operation, algorithm
    and size: the oracle would otherwise time one member's view and the agents' sums disagree)."""
    if not any(gpu.steps for gpu in gpus):
        raise InputError(f"{source}: no GPU has a step; a trace needs at least one")
    first: dict[tuple[str, tuple[int, ...]], tuple[int, CollectiveStep]] = {}
    for gpu in gpus:
        for step in gpu.steps:
            if not isinstance(step, CollectiveStep):
                continue
            rank, seen = first.setdefault((step.id, step.group), (gpu.rank, step))
            if (seen.op, seen.algorithm, seen.bytes) != (step.op, step.algorithm, step.bytes):
                raise InputError(f"{source}: collective '{step.id}' of GPUs {list(step.group)}: GPU {rank} runs "
                                 f"{seen.op} ({seen.algorithm}) of {seen.bytes} bytes, GPU {gpu.rank} {step.op} "
                                 f"({step.algorithm}) of {step.bytes}; every member must run the same one")

"""A schedule as Chakra execution traces, one `.et` file per rank, for other tools (ASTRA-sim and
the like) to read. An in-order schedule's order becomes control dependencies, so that a reader
that runs nodes when their dependencies are done runs them as the hosts do. Pure: bytes out."""

from __future__ import annotations

import json
from typing import Any

from testbed.model.errors import InputError
from testbed.model.schedule import Schedule, Step, as_collective, in_order_deps
from testbed.shared import collective_plans as plans
from testbed.workloads.chakra.load import EXACT_DURATION, PG_ATTRIBUTE
from testbed.workloads.chakra.proto import COLLECTIVES, NODE_TYPES, VERSION, GlobalMetadata, Node, attribute, encode

TYPE_OF = {"allreduce": "ALL_REDUCE", "reduce": "REDUCE", "allgather": "ALL_GATHER", "gather": "GATHER",
           "scatter": "SCATTER", "reducescatter": "REDUCE_SCATTER", "alltoall": "ALL_TO_ALL", "broadcast": "BROADCAST"}
PG_INIT = "process_group:init"


def process_groups(schedule: Schedule) -> dict[tuple[int, ...], str]:
    """Each collective's group by the name the traces give it, as ASTRA-sim names them: "0" for
    every rank, integers from 1 for the others."""
    world = tuple(range(schedule.hosts))
    groups = sorted({s.group for g in schedule.gpus for s in g.steps
                     if s.kind == "collective" and s.group and s.group != world}, key=lambda group: (len(group), group))
    return {world: "0", **{group: str(index) for index, group in enumerate(groups, start=1)}}


def comm_group_file(schedule: Schedule) -> str:
    """The groups as ASTRA-sim's comm-group file (--comm-group-configuration): {"1": [ranks], ...}."""
    return json.dumps({name: list(group) for group, name in process_groups(schedule).items() if name != "0"}, indent=1)


def _pg_init_node(pg_names: dict[tuple[int, ...], str]) -> Any:
    """The METADATA node PyTorch's execution traces open with, listing every group (ASTRA-sim reads
    it: inputs.values is a Python-style list holding one JSON string)."""
    entries = [{"pg_name": name, "ranks": list(group)} for group, name in pg_names.items() if name != "0"]
    node = Node(id=0, name=PG_INIT, type=NODE_TYPES["METADATA_NODE"])
    node.inputs.values = "['" + json.dumps(entries) + "']"
    return node


def _message_tags(schedule: Schedule) -> dict[tuple[int, int, str], int]:
    """A number per (src, dst, tag) of the schedule, counted per GPU pair."""
    numbers: dict[tuple[int, int, str], int] = {}
    per_pair: dict[tuple[int, int], int] = {}
    for gpu in schedule.gpus:
        for step in gpu.steps:
            if step.kind == "send" and step.peer is not None and step.tag is not None:
                key = (gpu.rank, step.peer, step.tag)
                if key not in numbers:
                    numbers[key] = per_pair.get(key[:2], 0)
                    per_pair[key[:2]] = numbers[key] + 1
    return numbers


def _node(step: Step, rank: int, node_id: int, deps: list[int], ctrl: list[int], pg_names: dict[tuple[int, ...], str],
          tags: dict[tuple[int, int, str], int]) -> Any:
    node = Node(id=node_id, name=step.id)
    node.data_deps.extend(deps)
    node.ctrl_deps.extend(ctrl)
    node.attr.append(attribute("is_cpu_op", False))
    if step.kind == "compute":
        node.type = NODE_TYPES["COMP_NODE"]
        node.duration_micros = max(1, round(step.compute_us or 0))
        if node.duration_micros != step.compute_us:
            exact = node.attr.add(name=EXACT_DURATION)
            exact.double_val = float(step.compute_us or 0)
    elif step.kind in ("send", "recv"):
        assert step.peer is not None and step.tag is not None  # a schedule's loader checks both
        src, dst = (rank, step.peer) if step.kind == "send" else (step.peer, rank)
        node.type = NODE_TYPES["COMM_SEND_NODE" if step.kind == "send" else "COMM_RECV_NODE"]
        attrs: dict[str, int | str] = {"comm_src": src, "comm_dst": dst, "comm_size": step.message_bytes(),
                                       "comm_tag": tags[(src, dst, step.tag)]}
    else:
        coll = as_collective(step)
        op, algorithm, group, size = coll.op, coll.algorithm, coll.group, coll.bytes
        if op not in TYPE_OF or algorithm in (*plans.SERVICE_ALGORITHMS, "ina"):
            raise InputError(f"step {step.id} on GPU {rank}: {op} with algorithm {algorithm} has no Chakra "
                             f"counterpart (Chakra names collectives among GPUs, not CPU summation services "
                             f"or in-network aggregation)")
        node.type = NODE_TYPES["COMM_COLL_NODE"]
        attrs = {"comm_type": COLLECTIVES[TYPE_OF[op]], "comm_size": size, "pg_name": pg_names[group],
                 "algorithm": algorithm}
    for name, value in attrs.items() if step.kind != "compute" else ():
        node.attr.append(attribute(name, value))
    return node


def export_chakra(schedule: Schedule) -> list[bytes]:
    """One `.et` file's bytes per rank, rank 0 first."""
    pg_names = process_groups(schedule)
    tags = _message_tags(schedule)
    files = []
    for gpu in schedule.gpus:
        metadata = GlobalMetadata(version=VERSION)
        metadata.attr.append(attribute("source", f"testbed schedule {schedule.name}"))
        for group, name in pg_names.items():
            metadata.attr.append(attribute(f"{PG_ATTRIBUTE}{name}", list(group)))
        ids = {step.id: index + 1 for index, step in enumerate(gpu.steps)}  # node 0 lists the groups
        deps = [(s.deps, ()) for s in gpu.steps] if schedule.execution == "dag" else \
            in_order_deps([(s.id, s.kind, s.deps) for s in gpu.steps])
        nodes = [_pg_init_node(pg_names)]
        nodes += [_node(step, gpu.rank, ids[step.id], [ids[d] for d in data], [ids[c] for c in ctrl], pg_names, tags)
                  for step, (data, ctrl) in zip(gpu.steps, deps)]
        files.append(encode(metadata, nodes))
    return files

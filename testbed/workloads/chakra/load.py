"""`workload.kind: chakra`: a directory of Chakra execution traces (`<prefix>.<rank>.et`, one per
rank) as a DAG schedule. COMP nodes become computes, COMM_SEND/RECV messages matched by (src, dst,
tag), COMM_COLL the named collective among its process group's ranks; nodes that move no data are
skipped (their dependencies pass through them) and counted. Every problem names the file, the node
and the field, and says what to fix."""

from __future__ import annotations

import ast
import heapq
import json
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

from testbed.core.messages import Message, MessageBook
from testbed.model.errors import InputError
from testbed.model.input_files import CHAKRA_TRACE_BYTES, SCENARIO_BYTES, TRACE_BYTES, read_bytes, read_json
from testbed.model.schedule import GpuSchedule, Schedule, step_from_json, with_channels
from testbed.shared import collective_plans as plans
from testbed.shared.collective_plans import schedule_traffic
from testbed.workloads.chakra.proto import (
    COLLECTIVE_NAMES,
    COLLECTIVES,
    INTEGER_KINDS,
    NODE_TYPE_NAMES,
    attribute_value,
    decode,
)

FILE_NAME = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et$")
# What each collective type runs as on the hosts; a barrier is a one-element all-reduce.
RUNS_AS = {"ALL_REDUCE": "allreduce", "REDUCE": "reduce", "ALL_GATHER": "allgather", "GATHER": "gather",
           "SCATTER": "scatter", "BROADCAST": "broadcast", "ALL_TO_ALL": "alltoall",
           "REDUCE_SCATTER": "reducescatter", "REDUCE_SCATTER_BLOCK": "reducescatter", "BARRIER": "allreduce"}
DEFAULT_ALGORITHMS = ("ring", "tree", "direct")  # the first one that runs the collective, unless the node names one
# ASTRA-sim's names for the group of every rank; other names are integers it looks up in a
# comm-group file or a process_group:init metadata node.
WORLD_NAMES = ("", "0")
BARRIER_BYTES = 4
SKIPPED_TYPES = ("METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE", "STORAGE_NODE", "BATCH_NODE",
                 "CHECKPOINT_NODE")
# This testbed's own attributes, which other readers ignore: the exact compute time (Chakra's
# duration_micros is whole µs) and a collective's algorithm (ring unless said).
EXACT_DURATION = "duration_us"
PG_ATTRIBUTE = "pg_ranks:"  # GlobalMetadata attribute `pg_ranks:<pg_name>` = the group's ranks (int list)
WORLD = "(all ranks)"


def trace_files(directory: Path, hosts: int, given_as: str = "workload.path") -> list[Path]:
    """The trace's files, rank 0 first; the ranks must be exactly 0..hosts-1 under one prefix."""
    if not directory.is_dir():
        raise InputError(f"{given_as}: {directory} is not a directory; give the directory that holds "
                         f"the trace's <prefix>.<rank>.et files")
    found: dict[str, dict[int, Path]] = defaultdict(dict)
    for path in directory.iterdir():
        match = FILE_NAME.match(path.name)
        if match:
            found[match["prefix"]][int(match["rank"])] = path
    if not found:
        raise InputError(f"{directory}: no Chakra trace files (<prefix>.<rank>.et) in it")
    if len(found) > 1:
        raise InputError(f"{directory}: files of {len(found)} traces ({', '.join(sorted(found))}); "
                         f"keep one trace per directory")
    (prefix, ranks), = found.items()
    if sorted(ranks) != list(range(len(ranks))):
        missing = sorted(set(range(max(ranks) + 1)) - set(ranks))
        raise InputError(f"{directory}: rank {missing[0]} has no file {prefix}.{missing[0]}.et; ranks run 0..N-1")
    if len(ranks) != hosts:
        raise InputError(f"{directory}: the trace has {len(ranks)} ranks but the fabric has {hosts} GPUs "
                         f"(fabric.hosts); make them equal")
    return [ranks[r] for r in range(hosts)]


def load_comm_groups(path: str | Path, hosts: int) -> dict[str, tuple[int, ...]]:
    """A comm-group file as ASTRA-sim reads it (--comm-group-configuration): JSON mapping each
    group's name (an integer) to its ranks, e.g. {"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]}."""
    data = read_json(path, 'a comm-group file ({"1": [0, 1, 2, 3], ...})', SCENARIO_BYTES, "workload.comm_groups")
    if not isinstance(data, dict):
        raise InputError(f'workload.comm_groups: {path} must map group names to rank lists, e.g. {{"1": [0, 1]}}')
    groups = {}
    for group, ranks in data.items():
        valid = isinstance(ranks, list) and all(isinstance(r, int) and 0 <= r < hosts for r in ranks)
        if not valid or not ranks or len(set(ranks)) != len(ranks):
            raise InputError(f"workload.comm_groups: {path}: group {group!r} must list distinct ranks in "
                             f"0..{hosts - 1} (got {ranks!r})")
        groups[str(group)] = tuple(ranks)
    return groups


def load_chakra(directory: str | Path, hosts: int, iterations: int,
                process_groups: Mapping[str, Sequence[int]] | None = None, name: str | None = None,
                comm_groups: str | Path | None = None) -> Schedule:
    """Read a trace directory into a DAG schedule of `iterations` rounds; groups named in
    `comm_groups` (ASTRA-sim's JSON file) and then `process_groups` override the trace's own."""
    files = trace_files(Path(directory), hosts)
    groups = dict(load_comm_groups(comm_groups, hosts)) if comm_groups is not None else {}
    groups.update({str(k): tuple(v) for k, v in (process_groups or {}).items()})
    total = sum(path.stat().st_size for path in files)
    if total > CHAKRA_TRACE_BYTES:
        raise InputError(f"{directory}: the trace's {len(files)} files hold {total:,} bytes, more than the "
                         f"{CHAKRA_TRACE_BYTES:,} a prediction reads (about 2 GB of memory as steps); trace "
                         f"one iteration, or fewer ranks")
    traces = []
    for rank, path in enumerate(files):
        traces.append(decode(read_bytes(path, "a Chakra .et trace file", TRACE_BYTES), str(path)))
    return chakra_schedule([(str(p), *t) for p, t in zip(files, traces)], hosts, iterations,
                           groups, name or Path(directory).name)


def _attributes(node: Any) -> dict[str, tuple[str | None, Any]]:
    return {a.name: (a.WhichOneof("value"), attribute_value(a)) for a in node.attr}


def _integer(where: str, attrs: dict[str, tuple[str | None, Any]], key: str, default: int | None = None,
             minimum: int | None = None) -> int:
    kind, value = attrs.get(key, (None, None))
    if kind is None:
        if default is None:
            raise InputError(f"{where}: needs the integer attribute '{key}'; add it")
        return default
    if kind.removesuffix("_val") not in INTEGER_KINDS:
        raise InputError(f"{where}: attribute '{key}' must be an integer (it is a {kind})")
    if minimum is not None and value < minimum:
        raise InputError(f"{where}: attribute '{key}' must be at least {minimum} (got {value})")
    return int(value)


def _metadata_groups(source: str, metadata: Any, hosts: int) -> dict[str, tuple[int, ...]]:
    groups = {}
    for attr in metadata.attr:
        if attr.name.startswith(PG_ATTRIBUTE):
            ranks = attribute_value(attr)
            if not isinstance(ranks, list) or any(not isinstance(r, int) or not 0 <= r < hosts for r in ranks):
                raise InputError(f"{source}: global metadata '{attr.name}' must list ranks in 0..{hosts - 1}")
            groups[attr.name.removeprefix(PG_ATTRIBUTE)] = tuple(ranks)
    return groups


def _pg_init_groups(source: str, node: Any, hosts: int) -> dict[str, tuple[int, ...]]:
    """A METADATA node's process groups, as PyTorch's execution trace records them in the node
    `process_group:init`: inputs.values holds [{"pg_name": "1", "ranks": [...]}, ...] (empty
    ranks = every rank), as JSON or inside a Python-style list of one string. Other metadata
    nodes carry none."""
    text = node.inputs.values if node.HasField("inputs") else ""
    named = "process_group:init" in node.name
    if not text.strip():
        return {}
    value: Any = None
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(text)
            break
        except (ValueError, SyntaxError):
            continue
    while isinstance(value, list) and len(value) == 1 and isinstance(value[0], (str, list)):
        inner = value[0]
        try:
            value = json.loads(inner) if isinstance(inner, str) else inner
        except ValueError:
            break
    entries = value if isinstance(value, list) else [value]
    if not all(isinstance(e, dict) and "pg_name" in e for e in entries):
        if named:
            raise InputError(f"{source}: node {node.id} ({node.name}): inputs.values must hold a list of "
                             f'{{"pg_name": ..., "ranks": [...]}} (got {text[:80]!r})')
        return {}
    groups = {}
    for entry in entries:
        ranks = entry.get("ranks") or list(range(hosts))
        if not isinstance(ranks, list) or any(not isinstance(r, int) or not 0 <= r < hosts for r in ranks):
            raise InputError(f"{source}: node {node.id} ({node.name}): process group {entry['pg_name']!r} must list "
                             f"ranks in 0..{hosts - 1} (got {ranks!r})")
        groups[str(entry["pg_name"])] = tuple(ranks)
    return groups


def _order(source: str, nodes: list[Any]) -> tuple[dict[int, Any], list[int]]:
    """Nodes by id and a topological order (ties by id); missing dependencies and cycles refused."""
    by_id: dict[int, Any] = {}
    for node in nodes:
        if node.id in by_id:
            raise InputError(f"{source}: node {node.id}: field 'id' repeats an earlier node's; ids are unique per file")
        by_id[node.id] = node
    # graphlib, not networkx: a 9 MB trace's 400,000 nodes took 13 s and 800 MB as a DiGraph
    graph: TopologicalSorter[int] = TopologicalSorter()
    for node in nodes:
        graph.add(node.id)
        for field in ("data_deps", "ctrl_deps"):
            deps = getattr(node, field)
            for dep in deps:
                if dep not in by_id:
                    raise InputError(f"{source}: node {node.id}: {field} names node {dep}, which is not in this "
                                     f"file; remove it or add the node")
            graph.add(node.id, *deps)
    try:
        graph.prepare()
    except CycleError as error:
        cycle = error.args[1]
        path = " → ".join(str(a) for a in cycle[:-1]) + f" → {cycle[0]}"
    else:
        ready = list(graph.get_ready())
        heapq.heapify(ready)
        order = []
        while ready:  # Kahn's order, the smallest id first among those ready (ties by id)
            node_id = heapq.heappop(ready)
            order.append(node_id)
            graph.done(node_id)
            for after in graph.get_ready():
                heapq.heappush(ready, after)
        return by_id, order
    raise InputError(f"{source}: nodes {path} form a dependency cycle (data_deps/ctrl_deps); break it")


def chakra_schedule(traces: list[tuple[str, Any, list[Any]]], hosts: int, iterations: int,
                    process_groups: Mapping[str, Sequence[int]] | None = None, name: str = "chakra") -> Schedule:
    """The DAG schedule of decoded traces: (source, GlobalMetadata, nodes) per rank, rank 0 first."""
    if len(traces) != hosts:
        raise InputError(f"the trace has {len(traces)} ranks but the fabric has {hosts} GPUs; make them equal")
    groups = _metadata_groups(traces[0][0], traces[0][1], hosts)
    for source, _, nodes in traces:
        for node in nodes:
            if NODE_TYPE_NAMES.get(node.type) == "METADATA_NODE":
                for pg, ranks in _pg_init_groups(source, node, hosts).items():
                    if groups.get(pg, ranks) != ranks and pg not in (process_groups or {}):
                        raise InputError(f"{source}: node {node.id}: process group {pg!r} is {list(ranks)} here "
                                         f"but {list(groups[pg])} in another file; every rank must agree")
                    groups[pg] = ranks
    groups.update({str(k): tuple(v) for k, v in (process_groups or {}).items()})
    skipped: Counter[str] = Counter()
    book: MessageBook[int] = MessageBook("comm_tag")
    colls: dict[str, dict[int, list[tuple[str, int, str]]]] = defaultdict(lambda: defaultdict(list))
    per_rank: list[list[dict[str, Any]]] = []
    for rank, (source, _, nodes) in enumerate(traces):
        by_id, order = _order(source, nodes)
        steps: list[dict[str, Any]] = []
        step_of: dict[int, tuple[str, ...]] = {}  # node id -> the step ids a dependant waits for
        for node_id in order:
            node = by_id[node_id]
            where = f"{source}: node {node_id}"
            deps = tuple(dict.fromkeys(d for dep in (*node.data_deps, *node.ctrl_deps) for d in step_of[dep]))
            type_name = NODE_TYPE_NAMES.get(node.type)
            if type_name is None or type_name == "INVALID_NODE":
                raise InputError(f"{where}: field 'type' is {node.type}, not a node type this testbed runs "
                                 f"(COMP_NODE, COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE, or one it skips: "
                                 f"{', '.join(SKIPPED_TYPES)})")
            attrs = _attributes(node)
            base: dict[str, Any] = {"id": f"n{node_id}", "deps": deps}
            step: dict[str, Any] | None = base
            if type_name in SKIPPED_TYPES or (type_name == "COMP_NODE" and node.duration_micros == 0):
                skipped[type_name if type_name != "COMP_NODE" else "COMP_NODE without duration (taken as 0 µs)"] += 1
                step = None
            elif type_name == "COMP_NODE":
                exact_kind, exact = attrs.get(EXACT_DURATION, (None, None))
                exact_us = exact if exact_kind == "double_val" and exact >= 0 else node.duration_micros
                base.update(kind="compute", compute_us=float(exact_us))
            elif type_name in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
                sending = type_name == "COMM_SEND_NODE"
                peer_key, own_key = ("comm_dst", "comm_src") if sending else ("comm_src", "comm_dst")
                peer = _integer(where, attrs, peer_key, minimum=0)
                if peer >= hosts or peer == rank:
                    raise InputError(f"{where}: attribute '{peer_key}' must be another rank, 0..{hosts - 1} "
                                     f"(got {peer})")
                if _integer(where, attrs, own_key, default=rank) != rank:
                    raise InputError(f"{where}: attribute '{own_key}' must be this file's rank, {rank}")
                size = _integer(where, attrs, "comm_size", minimum=1)
                tag = _integer(where, attrs, "comm_tag", default=0)
                message = Message(where, size, (rank, len(steps)))
                if sending:
                    book.send(rank, peer, tag, message)
                else:
                    book.recv(peer, rank, tag, message)
                base.update(kind="send" if sending else "recv", peer=peer, bytes=size)
            else:
                step = _collective(where, attrs, rank, hosts, groups, base)
                if step is None:
                    skipped["COMM_COLL_NODE of one rank"] += 1
                else:
                    colls[step["pg"]][rank].append((step["op"], step["bytes"], where))
                    step["id"] = f"{step['pg'] if step['pg'] != WORLD else 'world'}#{len(colls[step['pg']][rank]) - 1}"
            if step is None:
                step_of[node_id] = deps
            else:
                steps.append(step)
                step_of[node_id] = (step["id"],)
        per_rank.append(steps)
    for (src, dst, tag), k, sent, received in book.pairs():  # both sides get the same unique tag
        for rank, index in (sent.step, received.step):
            per_rank[rank][index]["tag"] = f"{src}>{dst}:{tag}#{k}"
    _check_collectives(colls, {**groups, WORLD: tuple(range(hosts))})
    gpus = with_channels(
        GpuSchedule(rank, tuple(step_from_json({k: v for k, v in s.items() if k != "pg"}) for s in steps))
        for rank, steps in enumerate(per_rank))
    return Schedule(name=name, hosts=hosts, iterations=iterations, gpus=gpus,
                    traffic_matrix_bytes=schedule_traffic(gpus, hosts), execution="dag",
                    skipped_nodes=tuple(sorted(skipped.items())))


def _collective(where: str, attrs: dict[str, tuple[str | None, Any]], rank: int, hosts: int,
                groups: dict[str, tuple[int, ...]], step: dict[str, Any]) -> dict[str, Any] | None:
    comm_type = _integer(where, attrs, "comm_type")
    type_name = COLLECTIVE_NAMES.get(comm_type)
    if type_name not in RUNS_AS:
        known = ", ".join(f"{n} ({COLLECTIVES[n]})" for n in RUNS_AS)
        raise InputError(f"{where}: attribute 'comm_type' {comm_type} ({type_name or 'unknown'}) is not a collective "
                         f"the hosts run; use one of {known}")
    kind, pg = attrs.get("pg_name", (None, None))
    if kind not in (None, "string_val"):
        raise InputError(f"{where}: attribute 'pg_name' must be a string (it is a {kind})")
    if pg in WORLD_NAMES:
        pg = None
    if pg is not None and pg not in groups:
        raise InputError(f"{where}: attribute 'pg_name' is '{pg}', a process group with no ranks given; list its "
                         f"ranks in a comm-group file (workload.comm_groups, ASTRA-sim's format), under "
                         f"workload.process_groups, or in a process_group:init metadata node")
    group = groups[pg] if pg else tuple(range(hosts))
    if rank not in group:
        raise InputError(f"{where}: rank {rank} is not in process group '{pg}' ({list(group)})")
    if len(set(group)) != len(group):
        raise InputError(f"{where}: process group '{pg}' lists a rank twice ({list(group)})")
    if len(group) < 2:
        return None
    op = RUNS_AS[str(type_name)]
    default = next(a for a in DEFAULT_ALGORITHMS if plans.supported(op, a))
    algorithm_kind, algorithm = attrs.get("algorithm", (None, default))
    if algorithm_kind not in (None, "string_val") or not plans.supported(op, algorithm) \
            or algorithm in plans.SERVICE_ALGORITHMS:
        hosts_run = (*plans.SERVICE_ALGORITHMS, "ina")
        can = sorted(a for o, a in plans.SUPPORTED_COLLECTIVES if o == op and a not in hosts_run)
        raise InputError(f"{where}: attribute 'algorithm' {algorithm!r} cannot run {op}; use {' or '.join(can)} "
                         f"(or leave it out: {default})")
    size = BARRIER_BYTES if type_name == "BARRIER" else _integer(where, attrs, "comm_size", minimum=1)
    return {**step, "kind": "collective", "op": op, "algorithm": algorithm, "group": group, "bytes": size,
            "pg": pg or WORLD}


def _check_collectives(colls: dict[str, dict[int, list[tuple[str, int, str]]]],
                       groups: dict[str, tuple[int, ...]]) -> None:
    """Every member of a process group runs the same collectives in the same order."""
    for pg, by_rank in colls.items():
        members = groups[pg]
        first = members[0]
        reference = by_rank.get(first, [])
        for rank in members:
            mine = by_rank.get(rank, [])
            for index in range(max(len(mine), len(reference))):
                if index >= len(mine) or index >= len(reference):
                    longer = mine if len(mine) > len(reference) else reference
                    short_rank = first if len(mine) > len(reference) else rank
                    raise InputError(f"{longer[index][2]}: collective {index} on process group '{pg}' has no "
                                     f"counterpart on rank {short_rank}; every member runs the same collectives")
                if mine[index][:2] != reference[index][:2]:
                    raise InputError(f"{mine[index][2]}: collective {index} on process group '{pg}' is "
                                     f"{mine[index][0]} of {mine[index][1]} bytes here but {reference[index][0]} of "
                                     f"{reference[index][1]} bytes on rank {first}; members must agree")

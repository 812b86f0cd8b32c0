"""Per-GPU schedules (steps with dependencies) and their JSON form, a versioned contract
(SCHEDULE_FORMAT) read by the host agents, the controller and users' own tools."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, Self, Union

import numpy as np

SCHEDULE_FORMAT = "testbed-schedule/1"


# The order a step's fields take in schedule.json (every kind's fields, each present where set).
JSON_ORDER = ("id", "kind", "deps", "compute_us", "peer", "bytes", "tag", "op", "algorithm", "group", "services",
              "chunks", "channel")


class _Fields:
    """What every kind of step shares: its JSON form."""

    def to_json(self) -> dict[str, Any]:
        fields = asdict(self)  # type: ignore[call-overload]  # every step kind is a dataclass
        return {k: (list(fields[k]) if isinstance(fields[k], tuple) else fields[k])
                for k in JSON_ORDER if fields.get(k) is not None}


@dataclass(frozen=True)
class ComputeStep(_Fields):
    """The GPU computes for `compute_us` (real-world)."""

    id: str
    compute_us: float
    deps: tuple[str, ...] = ()
    kind: Literal["compute"] = "compute"


@dataclass(frozen=True)
class _MessageStep(_Fields):
    """What a send and a receive share: `bytes` between this GPU and `peer`, paired by `tag`."""

    id: str
    peer: int
    bytes: int
    tag: str
    deps: tuple[str, ...] = ()

    def message_bytes(self) -> int:
        return self.bytes

    def with_peer(self, peer: int) -> Self:
        """The same message to or from `peer` (a data-parallel replica's copy), made as a copy of
        its fields: dataclasses.replace costs five times as much, over millions of steps."""
        moved = object.__new__(type(self))
        moved.__dict__.update(self.__dict__, peer=peer)
        return moved


@dataclass(frozen=True)
class SendStep(_MessageStep):
    """A message to `peer`, matched with the peer's receive of the same `tag`; posted, not waited for."""

    kind: Literal["send"] = "send"


@dataclass(frozen=True)
class RecvStep(_MessageStep):
    """A message from `peer`, the one its send of the same `tag` sent."""

    kind: Literal["recv"] = "recv"


@dataclass(frozen=True)
class CollectiveStep(_Fields):
    """A collective every GPU of `group` takes part in, with its buffer of `bytes`."""

    id: str
    op: str
    algorithm: str
    group: tuple[int, ...]
    bytes: int
    deps: tuple[str, ...] = ()
    services: tuple[int, ...] | None = None  # BytePS/PS: the CPU machines' ranks (summation only)
    chunks: int | None = None  # BytePS/PS: how many chunks the buffer is hashed in
    # DAG schedules: the collective's message-tag channel, the same on every member and distinct
    # among collectives that may run at once (with_channels numbers them)
    channel: int | None = None
    kind: Literal["collective"] = "collective"

    def collective(self) -> "Collective":
        """This step's collective fields."""
        return Collective(self.op, self.algorithm, self.group, self.bytes)


@dataclass(frozen=True)
class Collective:
    """A collective step's fields: the operation, its algorithm, the ranks taking part, the buffer."""

    op: str
    algorithm: str
    group: tuple[int, ...]
    bytes: int


# One step of a GPU's iteration, a union discriminated on `kind`.
Step = Union[ComputeStep, SendStep, RecvStep, CollectiveStep]
STEP_KINDS = ("compute", "send", "recv", "collective")


def as_collective(step: Step) -> Collective:
    """A step's collective fields; ValueError where the step is not a collective."""
    if not isinstance(step, CollectiveStep):
        raise ValueError(f"step {step.id} is a {step.kind} step, not a collective")
    return step.collective()


def step_from_json(data: dict[str, Any]) -> Step:
    """A step as this tool wrote it (schedule.json): trusted, typed once where the file is read.
    Users' files are checked field by field first (testbed.workloads.trace.load)."""
    kind, deps = data["kind"], tuple(data.get("deps", ()))
    if kind == "compute":
        return ComputeStep(data["id"], float(data["compute_us"]), deps)
    if kind == "send":
        return SendStep(data["id"], int(data["peer"]), int(data["bytes"]), str(data["tag"]), deps)
    if kind == "recv":
        return RecvStep(data["id"], int(data["peer"]), int(data["bytes"]), str(data["tag"]), deps)
    if kind == "collective":
        services = data.get("services")
        return CollectiveStep(data["id"], data["op"], data["algorithm"], tuple(data["group"]), int(data["bytes"]),
                              deps, tuple(services) if services is not None else None, data.get("chunks"),
                              data.get("channel"))
    raise ValueError(f"step {data.get('id')!r} has unknown kind {kind!r} (one of {', '.join(STEP_KINDS)})")


@dataclass(frozen=True)
class GpuSchedule:
    rank: int
    steps: tuple[Step, ...]


def traffic_pairs(matrix: Iterable[Iterable[float]] | None) -> dict[tuple[int, int], float]:
    """Bytes per ordered GPU pair with traffic, from an N×N matrix (rows send, columns receive).
    Rows without traffic are skipped whole: at 1,024 GPUs most of a small job's rows are zero."""
    pairs: dict[tuple[int, int], float] = {}
    for i, row in enumerate(matrix or []):
        if not any(row):
            continue
        values = np.asarray(row, dtype=float)
        for j in np.flatnonzero(values):
            if j != i:
                pairs[(i, int(j))] = float(values[j])
    return pairs


def cut_pairs(unreachable: Iterable[Iterable[int]], talking: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The `unreachable` (src, dst) pairs that GPUs exchanging data (`talking`) need, either way:
    TCP needs the reverse path for its acknowledgements."""
    needed = {pair for src, dst in talking for pair in ((src, dst), (dst, src))}
    return sorted({(a, b) for a, b in unreachable} & needed)


EXECUTIONS = ("in-order", "dag")


@dataclass(frozen=True)
class Schedule:
    """`execution` in-order: a GPU runs its steps in list order (a send is posted and not waited
    for). dag: a step starts once its `deps` are done; computes share the GPU one at a time,
    transfers and collectives run beside them (Chakra traces)."""

    name: str
    hosts: int
    iterations: int
    gpus: tuple[GpuSchedule, ...]
    traffic_matrix_bytes: tuple[tuple[int, ...], ...] = field(default=())
    execution: str = "in-order"
    # Nodes of an imported trace that move no data across the network, by type: (type, count)
    skipped_nodes: tuple[tuple[str, int], ...] = ()
    # Jobs on fixed shares of a reconfigurable fabric (job_sharing: partitioned): each job's GPUs
    partitions: tuple[tuple[int, ...], ...] = ()

    def traffic(self) -> dict[tuple[int, int], float]:
        return traffic_pairs(self.traffic_matrix_bytes)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Schedule":
        """A schedule.json this tool wrote (the run's, read by the agents), typed once."""
        return cls(name=str(data["name"]), hosts=int(data["hosts"]), iterations=int(data["iterations"]),
                   gpus=tuple(GpuSchedule(int(g["rank"]), tuple(step_from_json(s) for s in g["steps"]))
                              for g in sorted(data["gpus"], key=lambda g: g["rank"])),
                   traffic_matrix_bytes=tuple(tuple(row) for row in data.get("traffic_matrix_bytes", ())),
                   execution=str(data.get("execution", "in-order")),
                   skipped_nodes=tuple(dict(data.get("skipped_nodes", {})).items()),
                   partitions=tuple(tuple(group) for group in data.get("partitions", ())))

    def to_json(self) -> dict[str, Any]:
        return {
            "format": SCHEDULE_FORMAT,
            "name": self.name,
            "hosts": self.hosts,
            "iterations": self.iterations,
            "gpus": [{"rank": g.rank, "steps": [s.to_json() for s in g.steps]} for g in self.gpus],
            "traffic_matrix_bytes": [list(row) for row in self.traffic_matrix_bytes],
            "execution": self.execution,
            **({"skipped_nodes": dict(self.skipped_nodes)} if self.skipped_nodes else {}),
            **({"partitions": [list(group) for group in self.partitions]} if self.partitions else {}),
        }


BLOCKING_KINDS = ("compute", "recv", "collective")  # what an in-order GPU waits for before its next step


def in_order_deps(steps: Sequence[tuple[str, str, Sequence[str]]]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """An in-order GPU's (id, kind, deps) steps as a DAG: per step its data dependencies (a send
    is posted, never waited for, so dependencies on sends drop out) and its control dependency
    on the GPU's last blocking step before it."""
    kinds = {ident: kind for ident, kind, _ in steps}
    out: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    last_blocking: str | None = None
    for ident, kind, deps in steps:
        data = tuple(d for d in deps if kinds[d] != "send")
        out.append((data, (last_blocking,) if last_blocking is not None and last_blocking not in data else ()))
        if kind in BLOCKING_KINDS:
            last_blocking = ident
    return out


def with_channels(gpus: Iterable[GpuSchedule]) -> tuple[GpuSchedule, ...]:
    """The GPUs' steps with every collective numbered by (id, group), the same on each member, so
    that collectives running at once in a DAG schedule never share message tags."""
    gpus = tuple(gpus)
    keys = sorted({(s.id, s.group) for g in gpus for s in g.steps if isinstance(s, CollectiveStep)})
    number: dict[tuple[str, tuple[int, ...]], int] = {key: index for index, key in enumerate(keys)}
    return tuple(GpuSchedule(g.rank, tuple(replace(s, channel=number[(s.id, s.group)])
                                           if isinstance(s, CollectiveStep) else s for s in g.steps)) for g in gpus)

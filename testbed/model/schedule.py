"""Per-GPU schedules (steps with dependencies) and their JSON form, a versioned contract
(SCHEDULE_FORMAT) read by the host agents, the controller and users' own tools."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

SCHEDULE_FORMAT = "testbed-schedule/1"


@dataclass(frozen=True)
class Step:
    """One step of a GPU's iteration. `kind` is compute, send, recv or collective."""

    id: str
    kind: str
    deps: tuple[str, ...] = ()
    compute_us: float | None = None
    peer: int | None = None
    bytes: int | None = None
    tag: str | None = None
    op: str | None = None
    algorithm: str | None = None
    group: tuple[int, ...] | None = None
    services: tuple[int, ...] | None = None  # BytePS/PS: the CPU machines' ranks (summation only)
    chunks: int | None = None  # BytePS/PS: how many chunks the buffer is hashed in
    # DAG schedules: the collective's message-tag channel, the same on every member and distinct
    # among collectives that may run at once (with_channels numbers them)
    channel: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items() if v is not None}

    def collective(self) -> "Collective":
        """This step's collective fields, all present (a schedule's loader guarantees them)."""
        if self.kind != "collective" or self.op is None or self.algorithm is None or self.group is None \
                or self.bytes is None:
            raise ValueError(f"step {self.id} is a {self.kind} step, not a complete collective")
        return Collective(self.op, self.algorithm, self.group, self.bytes)

    def message_bytes(self) -> int:
        """A send's or receive's size."""
        if self.bytes is None:
            raise ValueError(f"step {self.id} ({self.kind}) has no size")
        return self.bytes


@dataclass(frozen=True)
class Collective:
    """A collective step's fields: the operation, its algorithm, the ranks taking part, the buffer."""

    op: str
    algorithm: str
    group: tuple[int, ...]
    bytes: int


@dataclass(frozen=True)
class GpuSchedule:
    rank: int
    steps: tuple[Step, ...]


def traffic_pairs(matrix: Iterable[Iterable[float]] | None) -> dict[tuple[int, int], float]:
    """Bytes per ordered GPU pair with traffic, from an N×N matrix (rows send, columns receive)."""
    return {(i, j): float(v) for i, row in enumerate(matrix or []) for j, v in enumerate(row) if v and i != j}


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
    keys = sorted({(s.id, s.group) for g in gpus for s in g.steps if s.kind == "collective"},
                  key=lambda k: (k[0], k[1] or ()))
    number: dict[tuple[str, tuple[int, ...] | None], int] = {key: index for index, key in enumerate(keys)}
    return tuple(GpuSchedule(g.rank, tuple(replace(s, channel=number[(s.id, s.group)]) if s.kind == "collective"
                                           else s for s in g.steps)) for g in gpus)

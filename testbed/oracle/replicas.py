"""Data-parallel replicas simulated once. Where a schedule is R copies of one replica's steps (each
replica's GPUs run the first's steps with its own peers) whose only exchanges across replicas are
ring collectives among counterparts (the same local GPU of each replica, in replica order), and the fabric
treats every GPU alike, every replica runs exactly as the first does: the first is simulated, its
ring edge to the next replica's counterpart standing in for every replica's (what leaves GPU g's
interface, and what arrives at the counterpart's, which by symmetry is what arrives at g's), and
its figures stand for all. Exact, not an approximation: the same max-min rates, the same events.

Elect-Cluster qualifies where every server holds GPUs of one replica only (the replicas then sit
on alike servers, and an edge to the next replica crosses the server's uplink and the counterpart
server's downlink, standing as the first server's own). Fabrics that plan links for traffic
(circuits, wavelengths) or hash flows over several spines are simulated whole: their plans need
not treat replicas alike."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from testbed.fabrics.elect_cluster.section import ElectClusterFabric
from testbed.model.fabric_section import FabricSection
from testbed.model.schedule import CollectiveStep, GpuSchedule, RecvStep, Schedule, SendStep
from testbed.oracle.replanning import replans_during_run
from testbed.oracle.schedule_sim import Simulated, simulate_counting_retunes

# Fabrics that treat replicas alike: Elect-Flat's GPUs are ports of one non-blocking switch;
# Elect-Cluster's servers are alike where no server holds GPUs of two replicas (across_replicas).
SYMMETRIC_KINDS = frozenset({"elect-flat", "elect-cluster"})
# Collectives across replicas whose every member sends and receives the same bytes over the same
# kind of edge (a ring to its successor): what the first replica's member moves is every member's.
CIRCULANT = frozenset({("allreduce", "ring"), ("reducescatter", "ring"), ("allgather", "ring")})


@dataclass(frozen=True)
class Replicas:
    """Where a schedule's GPUs sit among its identical data-parallel replicas: rank g is local GPU
    `placement[g][1]` of replica `placement[g][0]` (replica 0's local GPUs numbered 0..K-1)."""

    count: int
    placement: tuple[tuple[int, int], ...]

    @classmethod
    def blocks(cls, hosts: int, count: int) -> Replicas:
        """Replicas of consecutive ranks (a placed model's MP groups)."""
        size = max(1, hosts // max(1, count))
        return cls(count, tuple(divmod(g, size) for g in range(hosts)))


def first_replica(schedule: Schedule, replicas: Replicas, fabric: FabricSection) -> Schedule | None:
    """The first replica as a schedule of its own (its GPUs renumbered 0..K-1, each collective
    with the other replicas' counterparts as members K + local, 2K + local, ...), or None where
    simulating it alone would not be exact (checked on its steps: the replicas themselves are
    copies by construction of the kinds that pass `replicas`)."""
    hosts, count = schedule.hosts, replicas.count
    if count <= 1 or hosts % count or len(replicas.placement) != hosts or fabric.kind not in SYMMETRIC_KINDS \
            or replans_during_run(fabric) or schedule.partitions:
        return None
    k = hosts // count
    local = {g: at for g, (replica, at) in enumerate(replicas.placement) if replica == 0}
    if sorted(local.values()) != list(range(k)):
        return None
    by_rank = {gpu.rank: gpu for gpu in schedule.gpus}
    gpus = []
    for rank, at in sorted(local.items(), key=lambda item: item[1]):
        steps = []
        for step in by_rank[rank].steps:
            if isinstance(step, (SendStep, RecvStep)):
                if step.peer not in local:
                    return None
                step = step.with_peer(local[step.peer])
            elif isinstance(step, CollectiveStep):
                if all(m in local for m in step.group):
                    step = replace(step, group=tuple(local[m] for m in step.group))
                elif (step.op, step.algorithm) in CIRCULANT and \
                        [replicas.placement[m] for m in step.group] == [(j, at) for j in range(count)]:
                    step = replace(step, group=tuple(at + j * k for j in range(count)))
                else:
                    return None
            steps.append(step)
        gpus.append(GpuSchedule(at, tuple(steps)))
    order = sorted(local, key=local.__getitem__)
    matrix = schedule.traffic_matrix_bytes
    return replace(schedule, hosts=k, gpus=tuple(gpus),
                   traffic_matrix_bytes=tuple(tuple(matrix[a][b] for b in order) for a in order) if matrix else ())


def across_replicas(fabric: FabricSection, replicas: Replicas) -> dict[tuple[int, int], tuple[Any, ...]] | None:
    """The resources of each first-replica GPU's edge to the next replica's counterpart (the pair
    (g, g) of the first replica's numbering), where the fabric's own path for (g, g) is not it;
    None where the replicas do not sit alike on the fabric."""
    if not isinstance(fabric, ElectClusterFabric):
        return {}  # Elect-Flat: out of g's port and into its counterpart's, which stands as g's own
    if replicas.count <= 1 or len(replicas.placement) != fabric.hosts:
        return None
    per, local = fabric.gpus_per_server, {g: at for g, (r, at) in enumerate(replicas.placement) if r == 0}
    k = len(local)
    for server in range(0, fabric.hosts, per):
        places = {replicas.placement[g] for g in range(server, min(server + per, fabric.hosts))}
        if len({r for r, _ in places}) > 1:
            return None  # a server holds two replicas' GPUs: their edges need not leave it
        ats = sorted(at for _, at in places)
        if ats != list(range(ats[0] // per * per, ats[0] // per * per + per)) or k % per:
            return None  # the first replica's servers are not whole servers of its own numbering
    return {(at, at): (("out", at), ("up", at // per, 0), ("down", 0, at // per), ("in", at)) for at in range(k)}


def replica_fabric(fabric: FabricSection, schedule: Schedule) -> FabricSection:
    """The fabric of the first replica's GPUs alone (what a symmetric fabric gives each)."""
    return fabric.model_copy(update={"hosts": schedule.hosts})


def stands_for_all(fabric: FabricSection, replicas: Replicas) -> bool:
    """Whether the fabric treats the replicas alike, so that one replica's simulation can stand for
    all (the schedule's own steps are checked when it is simulated)."""
    return replicas.count > 1 and fabric.kind in SYMMETRIC_KINDS and not replans_during_run(fabric) \
        and across_replicas(fabric, replicas) is not None


def _simulate_first(schedule: Schedule, fabric: FabricSection, replicas: Replicas | None) -> Simulated | None:
    """The first replica simulated alone, its figures in its own numbering; None where not exact."""
    # The fabric's check first: it reads the placement, not every step.
    across = across_replicas(fabric, replicas) if replicas is not None else None
    first = first_replica(schedule, replicas, fabric) if replicas is not None and across is not None else None
    if replicas is None or across is None or first is None:
        return None
    alone = simulate_counting_retunes(first, replica_fabric(fabric, first), paths=across)
    said = (f"; one of {replicas.count} data-parallel replicas simulated, standing for all ({fabric.kind} "
            f"treats their GPUs alike)")
    return replace(alone, prediction=replace(alone.prediction, formula=alone.prediction.formula + said),
                   gpu_end_s=tuple(alone.gpu_end_s[at] for _, at in replicas.placement))


def simulate_replicated(schedule: Schedule, fabric: FabricSection, replicas: Replicas | None = None) -> Simulated:
    """The schedule simulated, its first replica alone where that is exact (first_replica), its
    figures then standing for every replica's."""
    alone = _simulate_first(schedule, fabric, replicas)
    if alone is None or replicas is None:
        return simulate_counting_retunes(schedule, fabric)
    rank = {place: g for g, place in enumerate(replicas.placement)}
    return replace(alone, message_bps={(rank[(r, src)], rank[(r, dst)], tag): bps for r in range(replicas.count)
                                       for (src, dst, tag), bps in alone.message_bps.items()})


def simulate_one_replica(first_only: Schedule, fabric: FabricSection, replicas: Replicas) -> Simulated | None:
    """A schedule that holds only its first replica's GPUs (every other replica a copy of it, left
    out: at thousands of GPUs the copies cost more than the simulation) simulated as
    simulate_replicated does, without the per-message rates a run would read; None where one
    replica cannot stand for all (callers ask stands_for_all before building the replica)."""
    alone = _simulate_first(first_only, fabric, replicas)
    return None if alone is None else replace(alone, message_bps={})

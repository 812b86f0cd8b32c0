"""The bytes all GPUs put on the wire in one iteration, by primitive and by parallelism (pure),
counted from the schedule itself: each collective once per group, from its algorithm's plan."""

from __future__ import annotations

from dataclasses import dataclass

from testbed.model.schedule import CollectiveStep, Schedule, SendStep
from testbed.shared.collective_plans import collective_edges

PRIMITIVES = {"allreduce": "all-reduce", "reducescatter": "reduce-scatter", "allgather": "all-gather",
              "alltoall": "all-to-all", "broadcast": "broadcast"}
PARALLELISMS = ("tp", "pp", "dp", "ep")


@dataclass(frozen=True)
class TrafficBytes:
    by_primitive: dict[str, int]
    by_parallelism: dict[str, int]

    def total(self) -> int:
        return sum(self.by_primitive.values())

    def to_json(self) -> dict[str, dict[str, int]]:
        return {"by_primitive": dict(self.by_primitive), "by_parallelism": dict(self.by_parallelism)}


def parallelism_of(step_id: str) -> str:
    prefix = step_id.split(".", 1)[0]
    return prefix if prefix in PARALLELISMS else "other"


def traffic_bytes(schedule: Schedule) -> TrafficBytes:
    """A ring all-reduce of M over t GPUs puts 2(t-1)/t·M on the wire from each of the t; an INA
    all-reduce M from each (the node's sums are the node's)."""
    primitive = {name: 0 for name in (*PRIMITIVES.values(), "send-recv")}
    parallelism = {name: 0 for name in PARALLELISMS}
    seen: set[tuple[str, tuple[int, ...]]] = set()
    for gpu in schedule.gpus:
        for step in gpu.steps:
            if isinstance(step, SendStep):  # expert parallelism's are its all-to-alls' pairs
                primitive["all-to-all" if parallelism_of(step.id) == "ep" else "send-recv"] += step.bytes
                parallelism[parallelism_of(step.id)] = parallelism.get(parallelism_of(step.id), 0) + step.bytes
            elif isinstance(step, CollectiveStep) and (step.id, step.group) not in seen:
                seen.add((step.id, step.group))
                if step.algorithm == "ina":  # each member sends M to the aggregation node
                    wire = len(step.group) * step.bytes
                else:
                    wire = sum(b for _, _, b in collective_edges(step.op, step.algorithm, len(step.group), step.bytes))
                name = PRIMITIVES.get(step.op, step.op)
                primitive[name] = primitive.get(name, 0) + wire
                parallelism[parallelism_of(step.id)] = parallelism.get(parallelism_of(step.id), 0) + wire
    return TrafficBytes(primitive, parallelism)

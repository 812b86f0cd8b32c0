"""The `collective` workload's scenario section: one collective every GPU takes part in."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from testbed.model.limits import MAX_COLLECTIVE_BYTES
from testbed.model.workload_section import WorkloadSection
from testbed.shared.collective_plans import SERVICE_ALGORITHMS

CollectiveOp = Literal["allreduce", "allgather", "reducescatter", "alltoall", "sendrecv", "broadcast", "reduce",
                       "gather", "scatter"]
Algorithm = Literal["ring", "halving-doubling", "tree", "direct", "ps", "byteps", "ina"]
# Algorithms run by a service beside the GPUs, shared by the whole fabric and not a job's own:
# summation services (BytePS, PS) or an aggregation node (INA).
SHARED_SERVICE_ALGORITHMS: tuple[str, ...] = (*SERVICE_ALGORITHMS, "ina")


class CollectiveWorkload(WorkloadSection):
    description: ClassVar[str] = "one collective every GPU takes part in, once an iteration"
    kind: Literal["collective"]
    collective: CollectiveOp  # which one every GPU takes part in
    # how it runs (ps and byteps need a ps or elect-cluster fabric, ina an ina fabric)
    algorithm: Algorithm = "ring"
    bytes: int = Field(gt=0, le=MAX_COLLECTIVE_BYTES)  # the real-world buffer size

    default_warmups: ClassVar[int] = 2

    def job_refusal(self) -> str | None:
        if self.algorithm in SHARED_SERVICE_ALGORITHMS:
            return (f"a job's collective cannot use algorithm {self.algorithm} (its summation services are shared, "
                    f"not the job's); use ring, halving-doubling or tree")
        return None

    def describe(self) -> str:
        return f"{self.collective} ({self.algorithm}, {self.bytes} B)"

"""The `chakra` workload's scenario section: a directory of Chakra execution traces, one per rank."""

from __future__ import annotations

from typing import ClassVar, Literal

from testbed.model.workload_section import WorkloadSection


class ChakraWorkload(WorkloadSection):
    description: ClassVar[str] = "Chakra execution traces, one per rank (docs/chakra.md)"
    kind: Literal["chakra"]
    path: str  # the directory of <prefix>.<rank>.et files, relative to the scenario
    # process group name -> its ranks, for groups the trace's metadata does not list
    process_groups: dict[str, list[int]] | None = None
    # a comm-group file in ASTRA-sim's format ({"1": [0, 1, 2, 3], ...}), relative to the scenario
    comm_groups: str | None = None

    def fits(self, hosts: int, whose: str) -> None:
        super().fits(hosts, whose)
        for name, ranks in (self.process_groups or {}).items():
            if len(set(ranks)) != len(ranks) or any(not 0 <= r < hosts for r in ranks):
                raise ValueError(f"workload.process_groups.{name} must list distinct ranks in "
                                 f"0..{hosts - 1} (got {ranks})")

    def describe(self) -> str:
        return f"Chakra traces in {self.path}"

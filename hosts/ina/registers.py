"""Pipeline stage 3, the register arrays: per slot and shadow copy, the running sum, the bitmap of
workers summed in, the element count, exponent and operation; for shared slots the owning
(job, sequence) and every worker's low-water sequence. Pure state, no I/O."""

from __future__ import annotations

from typing import Callable

import numpy as np

from hosts.ina.protocol import ELEMENTS_PER_PACKET

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


class SlotRegisters:
    def __init__(self, pool_slots: int, elements: int = ELEMENTS_PER_PACKET) -> None:
        self.pool_slots = pool_slots
        # int64 accumulators: a sum that leaves int32 is detected and flagged, never wrapped.
        self.sums = np.zeros((2, pool_slots, elements), dtype=np.int64)
        self.seen = [[0] * pool_slots for _ in range(2)]
        self.count = [[0] * pool_slots for _ in range(2)]
        self.elements = [[0] * pool_slots for _ in range(2)]
        self.exp = [[0] * pool_slots for _ in range(2)]
        self.op = [[0] * pool_slots for _ in range(2)]  # the MAX / INT flags of the chunk in the slot
        self.complete = [[False] * pool_slots for _ in range(2)]
        self.late = [[False] * pool_slots for _ in range(2)]  # a retransmission contributed (reserved)
        self.seq = [[-1] * pool_slots for _ in range(2)]  # reserved slots: the chunk each copy holds
        self.owner: list[tuple[int, int] | None] = [None] * pool_slots  # shared slots: (job, seq)
        # Chunks sent to the end host, with the bitmap of workers whose packets went there: later
        # packets of such a chunk follow it even if its slot frees meanwhile, so no chunk is ever
        # split between a slot and the end host; forgotten once every worker's packet went.
        self.spilled: dict[tuple[int, int], int] = {}
        self.low_seq: dict[tuple[int, int], int] = {}  # (job, worker) → lowest seq it still waits for

    def load(self, ver: int, slot: int, bit: int, values: np.ndarray, exp: int, op: int, seq: int = -1) -> None:
        """First contribution of a new use of the slot: overwrite rather than add (no reset pass)."""
        count = values.size
        self.seq[ver][slot] = seq
        self.sums[ver, slot, :count] = values
        self.seen[ver][slot] = bit
        self.count[ver][slot] = 1
        self.elements[ver][slot] = count
        self.exp[ver][slot] = exp
        self.op[ver][slot] = op
        self.complete[ver][slot] = False

    def accumulate(self, ver: int, slot: int, bit: int, values: np.ndarray, is_max: bool) -> None:
        row = self.sums[ver, slot, :values.size]
        if is_max:
            np.maximum(row, values, out=row)
        else:
            row += values
        self.seen[ver][slot] |= bit
        self.count[ver][slot] += 1

    def result(self, ver: int, slot: int) -> tuple[np.ndarray, bool]:
        """The slot's value as int32 and whether it overflowed int32 (then it is clipped)."""
        row = self.sums[ver, slot, :self.elements[ver][slot]]
        overflow = bool(row.size) and (int(row.max()) > INT32_MAX or int(row.min()) < INT32_MIN)
        if overflow:
            row = np.clip(row, INT32_MIN, INT32_MAX)
        return row.astype(np.int32), overflow

    def reclaimable(self, slot: int, workers_of: Callable[[int], int]) -> bool:
        """A shared slot can take a new chunk once it is free, or complete and every worker of its
        owner has moved past it (so no one can still ask for its result)."""
        owner = self.owner[slot]
        if owner is None:
            return True
        if not self.complete[0][slot]:
            return False
        return self.moved_past(owner, workers_of)

    def moved_past(self, chunk: tuple[int, int], workers_of: Callable[[int], int]) -> bool:
        """Whether every worker of the chunk's job said it waits for nothing at or before it."""
        job, seq = chunk
        return all(self.low_seq.get((job, w), 0) > seq for w in range(workers_of(job)))

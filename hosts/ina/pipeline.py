"""The aggregation node's data plane: parser → tables → register actions → deparser, with the
built-in loss injector in front. Pure (explicit seed, no sockets), so tests and the fuzzer drive
it directly and the node program only moves bytes."""

from __future__ import annotations

import random
from collections import Counter

from hosts.ina import aggregate
from hosts.ina.deparser import deparse
from hosts.ina.parser import Drop, parse
from hosts.ina.registers import SlotRegisters
from hosts.ina.tables import Tables


class Pipeline:
    def __init__(self, pool_slots: int, sharing: str, drop_frac: float = 0.0, seed: int = 0) -> None:
        if not 0.0 <= drop_frac < 1.0:
            raise ValueError(f"drop_frac must be in [0, 1), not {drop_frac}")
        self.tables = Tables(pool_slots, sharing)
        self.registers = SlotRegisters(pool_slots)
        self.counters: Counter = Counter()
        self.drop_frac = drop_frac
        self._random = random.Random(seed)

    def _workers_of(self, job: int) -> int:
        entry = self.tables.jobs.get(job)
        return len(entry.workers) if entry else 0

    def process(self, data: bytes | memoryview, source: str) -> list[tuple[bytes, tuple[str, int]]]:
        """Everything the node sends in answer to one received packet (often nothing)."""
        counters = self.counters
        counters["received"] += 1
        if self.drop_frac and self._random.random() < self.drop_frac:
            counters["injected_drops"] += 1
            return []
        try:
            header, values = parse(data)
            entry = self.tables.match(header, source)
        except Drop as drop:
            counters["dropped_" + drop.reason] += 1
            return []
        if entry.sharing == "reserved":
            emits = aggregate.reserved(self.registers, entry, header, values, counters)
        else:
            emits = aggregate.shared(self.registers, entry, header, values, counters, self._workers_of)
        return [copy for emit in emits for copy in deparse(emit)]

    def drops(self) -> int:
        return sum(v for k, v in self.counters.items() if k.startswith("dropped_") or k == "injected_drops")

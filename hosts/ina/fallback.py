"""End-host aggregation for a job's chunks that collided in shared slots (ATP's parameter-server
path): pieces arrive with the bitmap of workers they contain (single packets, or a slot's partial
sum flushed by a retransmission); a chunk completes when the bitmaps cover every worker, and its
result goes to every worker. Overlapping pieces are never added twice. Pure."""

from __future__ import annotations

from collections import Counter

import numpy as np

from hosts.ina.deparser import encode
from hosts.ina.parser import Header
from hosts.ina.protocol import DATA_PORT, FALLBACK, FLUSH, INT, MAX, RESULT


class EndHostAggregator:
    def __init__(self, job: int, workers: tuple[str, ...]) -> None:
        self.job = job
        self.workers = workers
        self.all_bits = (1 << len(workers)) - 1
        self.pending: dict[int, list] = {}  # seq → [int64 sum, bitmap, header]
        self.results: dict[int, bytes] = {}  # seq → encoded result, kept until every worker moved past it
        self.low_seq = [0] * len(workers)
        self.counters: Counter = Counter()

    def piece(self, h: Header, values: np.ndarray) -> list[tuple[bytes, tuple[str, int]]]:
        if h.job != self.job or not h.flags & FALLBACK or h.worker >= len(self.workers):
            self.counters["dropped_foreign"] += 1
            return []
        self.low_seq[h.worker] = max(self.low_seq[h.worker], h.low_seq)
        self._evict()
        done = self.results.get(h.seq)
        if done is not None:
            if not h.flags & FLUSH:  # a worker that lost the result asks again
                self.counters["results_resent"] += 1
                return [(done, (self.workers[h.worker], DATA_PORT))]
            return []
        state = self.pending.get(h.seq)
        if state is None:
            state = self.pending[h.seq] = [np.array(values, dtype=np.int64), h.bitmap, h]
        elif h.bitmap & state[1] == 0:
            if h.flags & MAX:
                np.maximum(state[0], values, out=state[0])
            else:
                state[0] += values
            state[1] |= h.bitmap
        else:
            self.counters["duplicates_dropped" if h.bitmap & ~state[1] == 0 else "overlaps_dropped"] += 1
            return []
        self.counters["pieces"] += 1
        if state[1] != self.all_bits:
            return []
        total, _, first = self.pending.pop(h.seq)
        flags = RESULT | FALLBACK | (first.flags & (MAX | INT))
        header = Header(self.job, 0, flags, first.slot, 0, first.exp, h.seq, 0, self.all_bits, total.size)
        packet = encode(header, np.clip(total, -(1 << 31), (1 << 31) - 1))
        self.results[h.seq] = packet
        self.counters["results_multicast"] += 1
        return [(packet, (address, DATA_PORT)) for address in self.workers]

    def _evict(self) -> None:
        low = min(self.low_seq)
        for seq in [s for s in self.results if s < low]:
            del self.results[seq]

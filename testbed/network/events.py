"""The pieces of the oracle's packet-level simulations: a time-ordered event queue whose ties keep
the order events were made, a FIFO link that serialises one frame at a time, and the workers' windows."""

from __future__ import annotations

import heapq
from typing import Any, Iterator


class EventQueue:
    def __init__(self) -> None:
        self._heap: list[tuple[Any, ...]] = []
        self._order = 0

    def push(self, at_s: float, *event: Any) -> None:
        self._order += 1
        heapq.heappush(self._heap, (at_s, self._order, *event))

    def pop(self) -> tuple[Any, ...]:
        """(time, *event) of the earliest event."""
        at_s, _, *event = heapq.heappop(self._heap)
        return (at_s, *event)

    def __bool__(self) -> bool:
        return bool(self._heap)


class FifoLinks:
    """Links that each carry one frame of `frame_s` at a time, in the order frames were handed over."""

    def __init__(self, count: int, frame_s: float, free_s: list[float] | None = None) -> None:
        self.frame_s = frame_s
        self.free_s = list(free_s) if free_s is not None else [0.0] * count

    def send(self, now_s: float, link: int) -> float:
        """When a frame handed to `link` at `now_s` has crossed it."""
        arrive_s = max(now_s, self.free_s[link]) + self.frame_s
        self.free_s[link] = arrive_s
        return arrive_s


class WorkerWindows:
    """Every worker's window over one pass of `chunks` chunks (hosts/ina/client.py's rule): a worker
    sends chunk c once c < window or chunk c − window has its result, and has finished when it holds
    every result. `low` is the first chunk each worker still waits for (what its packets carry)."""

    def __init__(self, workers: int, chunks: int, window: int, start_s: tuple[float, ...] | list[float]) -> None:
        self.chunks, self.window = chunks, window
        self.sent = [0] * workers
        self.done = [bytearray(chunks) for _ in range(workers)]
        self.low = [0] * workers
        self.finish_s = list(start_s) if chunks == 0 else [0.0] * workers

    def sendable(self, worker: int) -> Iterator[int]:
        """The chunks `worker` may send now, in order, each counted as sent when yielded."""
        while self.sent[worker] < self.chunks and (self.sent[worker] < self.window
                                                   or self.done[worker][self.sent[worker] - self.window]):
            self.sent[worker] += 1
            yield self.sent[worker] - 1

    def result(self, now_s: float, worker: int, chunk: int) -> bool:
        """Record that `worker` got `chunk`'s result at `now_s`; False when it already had it."""
        done = self.done[worker]
        if done[chunk]:
            return False
        done[chunk] = 1
        while self.low[worker] < self.chunks and done[self.low[worker]]:
            self.low[worker] += 1
        if self.low[worker] == self.chunks:
            self.finish_s[worker] = now_s
        return True

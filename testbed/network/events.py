"""The pieces of the oracle's packet-level simulations: a time-ordered event queue whose ties keep
the order events were made, and a FIFO link that serialises one frame at a time (the workers'
windows are the agents' own rule, testbed.shared.ina_rules.WorkerWindows)."""

from __future__ import annotations

import heapq
from typing import Any


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

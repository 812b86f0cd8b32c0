"""The serialisation time a real link adds, for INA packets: the emulation's links release a frame
when the shaper's token is there and the veth pair delivers it at once, where a real link delivers
it one frame time later. A receiver that holds every packet for its own frame time on the link it
crossed turns a one-frame token bucket into a store-and-forward link, which is what the oracle's
simulations model (bench/ina_links.py shows the difference in ATP's collisions)."""

from __future__ import annotations

import heapq
from typing import Any

# What a UDP datagram's frame adds to its payload: Ethernet 14, IPv4 20, UDP 8.
UDP_FRAME_OVERHEAD_BYTES = 42


class LinkHold:
    """Packets each released `hops` frame times after they arrived, frame times at `line_rate_bps`
    (the shaped rate of the links, in frames' bits per wall-clock second); no rate: no hold."""

    def __init__(self, line_rate_bps: float | None) -> None:
        self.s_per_byte = 8.0 / line_rate_bps if line_rate_bps else 0.0
        self._heap: list[tuple[float, int, Any]] = []
        self._order = 0

    @property
    def active(self) -> bool:
        return self.s_per_byte > 0

    def frame_s(self, datagram_bytes: int) -> float:
        return (datagram_bytes + UDP_FRAME_OVERHEAD_BYTES) * self.s_per_byte

    def add(self, now_s: float, datagram_bytes: int, item: Any, hops: int = 1) -> None:
        self._order += 1
        heapq.heappush(self._heap, (now_s + hops * self.frame_s(datagram_bytes), self._order, item))

    def pop_due(self, now_s: float) -> Any | None:
        """The earliest-due item whose time has come, or None."""
        if self._heap and self._heap[0][0] <= now_s:
            return heapq.heappop(self._heap)[2]
        return None

    def next_due_s(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def wait_s(self, now_s: float, longest_s: float) -> float:
        """How long a receiver may block on its socket: until the next packet is due, at most `longest_s`."""
        due = self.next_due_s()
        return longest_s if due is None else min(longest_s, max(0.0, due - now_s))

    def __len__(self) -> int:
        return len(self._heap)

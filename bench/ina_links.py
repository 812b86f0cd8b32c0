"""How the links' timing moves ATP's collisions: two jobs of four workers on shared slots, simulated
with the node's own code (hosts.ina.aggregate.shared, the end-host aggregator) and the workers'
window rule, over store-and-forward links (a frame arrives one frame time after it leaves, as on a
real link and in the oracle), over token-bucket links that release a frame once a token is
there and deliver it at once (HTB over a veth pair), and over one-frame buckets whose receivers
hold each frame for its frame time, as the emulation's INA links do.

Pure, no root: `.venv/bin/python bench/ina_links.py`. Writes bench/results/ina_links.{json,md}.
Times are in frames per chunk; the share is of the chunks summed by the end host.
"""

from __future__ import annotations

import statistics
from collections import Counter

import numpy as np
from bench_results import save_rows

from hosts.ina import aggregate
from hosts.ina.client import shared_slot
from hosts.ina.fallback import EndHostAggregator
from hosts.ina.parser import Header, parse_result
from hosts.ina.protocol import INT
from hosts.ina.registers import SlotRegisters
from hosts.ina.tables import JobEntry
from testbed.network.events import EventQueue, FifoLinks
from testbed.shared.ina_rules import WorkerWindows

JOBS, WORKERS, WINDOW, POOL, CHUNKS, PASSES = 2, 4, 8, 128, 1000, 6  # as ina-two-jobs runs


class BucketLinks:
    """A frame leaves once the link's bucket (one token per frame time, at most `depth`) has a
    token, and arrives at once."""

    def __init__(self, count: int, depth: float) -> None:
        self.depth = depth
        self.tokens = [depth] * count
        self.last = [0.0] * count

    def send(self, now: float, link: int) -> float:
        at = max(now, self.last[link])
        tokens = min(self.depth, self.tokens[link] + at - self.last[link])
        if tokens < 1:
            at, tokens = at + 1 - tokens, 1.0
        self.tokens[link], self.last[link] = tokens - 1, at
        return at


class HeldBucketLinks(BucketLinks):
    """A one-frame token bucket whose receiver holds each frame one frame time (hosts/ina/hold.py):
    store-and-forward again, shifted by the hold."""

    def send(self, now: float, link: int) -> float:
        return super().send(now, link) + 1.0


def simulate(make_links) -> list[tuple[float, float]]:
    """(frames per chunk, collided share) of each pass."""
    hosts = JOBS * WORKERS
    address = [f"10.{h // WORKERS}.0.{h % WORKERS}" for h in range(hosts)]
    host_of = {a: h for h, a in enumerate(address)}
    entries = [JobEntry(j + 1, tuple(address[j * WORKERS:(j + 1) * WORKERS]), 0, POOL, "shared", address[j * WORKERS])
               for j in range(JOBS)]
    regs, counters = SlotRegisters(POOL, elements=1), Counter()
    aggregators = [EndHostAggregator(j + 1, entries[j].workers) for j in range(JOBS)]
    up, down = make_links(hosts), make_links(hosts)
    one = np.ones(1, dtype=np.int32)
    begin, passes = 0.0, []
    for p in range(PASSES):
        base = p * CHUNKS
        windows = WorkerWindows(hosts, CHUNKS, WINDOW, [begin] * hosts)
        events, before = EventQueue(), counters["collisions"]

        def send_allowed(now: float, h: int) -> None:
            job, worker = divmod(h, WORKERS)
            for c in windows.sendable(h):
                seq = base + c
                header = Header(job + 1, worker, INT, shared_slot(job + 1, seq, POOL), 0, 0, seq,
                                base + windows.low[h], 1 << worker, 1)
                events.push(up.send(now, h), "node", h, header)

        for h in range(hosts):
            send_allowed(begin, h)
        while events:
            now, kind, h, header = events.pop()
            if kind == "node":
                for emit in aggregate.shared(regs, entries[header.job - 1], header, one, counters,
                                             lambda job: WORKERS):
                    for a in emit.to:
                        to = host_of[a]
                        events.push(down.send(now, to), "fallback" if emit.fallback else "result", to, emit.header)
            elif kind == "fallback":  # at the job's worker 0; its results to the others go via the node
                for packet, (a, _) in aggregators[h // WORKERS].piece(header, one):
                    result, to = parse_result(memoryview(packet))[0], host_of[a]
                    if to == h:
                        events.push(now, "result", to, result)
                    else:
                        events.push(up.send(now, h), "via_node", to, result)
            elif kind == "via_node":
                events.push(down.send(now, h), "result", h, header)
            elif windows.result(now, h, header.seq - base):
                send_allowed(now, h)
        passes.append(((max(windows.finish_s) - begin) / CHUNKS, (counters["collisions"] - before) / (JOBS * CHUNKS)))
        begin = max(windows.finish_s)
    return passes


LINKS = {
    "store-and-forward (real, the oracle)": lambda n: FifoLinks(n, 1.0),
    "token bucket of 1 frame, the receiver holding each frame one frame time (the emulation's INA links)":
        lambda n: HeldBucketLinks(n, 1.0),
    "token bucket of 1 frame, delivered at once": lambda n: BucketLinks(n, 1.0),
    "token bucket of 2 frames, delivered at once (HTB's default depth here)": lambda n: BucketLinks(n, 2.0),
    "token bucket of 4 frames, delivered at once": lambda n: BucketLinks(n, 4.0),
}


def main() -> int:
    rows = []
    for name, make in LINKS.items():
        passes = simulate(make)[1:]  # the first pass starts on an empty pool
        rows.append({"links": name, "status": "ok", "correct": True,
                     "frames_per_chunk": statistics.mean(t for t, _ in passes),
                     "collided_share": statistics.mean(s for _, s in passes),
                     "collided_min": min(s for _, s in passes), "collided_max": max(s for _, s in passes)})
    reference = rows[0]["frames_per_chunk"]
    header = ["| links | frames per chunk | vs store-and-forward | collided share (min-max over passes) |",
              "| --- | ---: | ---: | :---: |"]
    return save_rows("ina_links", rows, header, lambda r: (
        f"{r['links']} | {r['frames_per_chunk']:.3f} | {r['frames_per_chunk'] / reference:.3f} | "
        f"{r['collided_share']:.1%} ({r['collided_min']:.1%}-{r['collided_max']:.1%})"))


if __name__ == "__main__":
    raise SystemExit(main())

"""ATP's shared slots: an event simulation of jobs whose workers hash chunks over one pool of the
node's slots (hosts/ina/aggregate.py), where a chunk that finds its slot held goes to its job's
end-host aggregator on worker 0, whose links then carry it and its result."""

from __future__ import annotations

from dataclasses import dataclass

from testbed.network.events import EventQueue, FifoLinks
from testbed.shared.ina_rules import WorkerWindows, shared_slot


@dataclass(frozen=True)
class SharedPool:
    """Jobs of `workers` each on one node with `pool_slots` slots; real-world seconds."""

    jobs: int
    workers: int
    window: int
    pool_slots: int
    frame_s: float


@dataclass(frozen=True)
class SharedPass:
    finish_s: tuple[float, ...]  # per host (job-major), when it had every result
    chunks: int  # chunks of all jobs in the pass
    collisions: int  # of those, summed by the end host

    @property
    def time_s(self) -> float:
        return max(self.finish_s)


class SharedNode:
    """The node's slot table, the jobs' aggregators and every link, kept across passes: slots
    still held at the end of one pass meet the next pass's chunks."""

    def __init__(self, pool: SharedPool) -> None:
        self.pool = pool
        hosts = pool.jobs * pool.workers
        self.uplinks, self.downlinks = FifoLinks(hosts, pool.frame_s), FifoLinks(hosts, pool.frame_s)
        self.owner: list[tuple[int, int] | None] = [None] * pool.pool_slots
        self.count = [0] * pool.pool_slots
        self.spilled: set[tuple[int, int]] = set()
        self.low_seq = [0] * hosts  # what each worker last said it still waits for
        self.next_seq = [0] * pool.jobs

    def reclaimable(self, slot: int) -> bool:
        owner = self.owner[slot]
        if owner is None:
            return True
        job, seq = owner
        n = self.pool.workers
        return self.count[slot] == n and all(self.low_seq[job * n + w] > seq for w in range(n))

    def run_pass(self, chunks: int, start_s: tuple[float, ...]) -> SharedPass:
        """Every job's workers send `chunks` chunks (window rule as hosts/ina/client.py)."""
        pool, n, window = self.pool, self.pool.workers, self.pool.window
        hosts = pool.jobs * n
        base = list(self.next_seq)
        for j in range(pool.jobs):
            self.next_seq[j] += chunks
        windows = WorkerWindows(hosts, chunks, window, start_s)
        fallback: dict[tuple[int, int], int] = {}  # (job, seq) → contributions at the end host
        events = EventQueue()
        collisions = 0

        def down(now: float, host: int, kind: str, seq: int) -> None:
            events.push(self.downlinks.send(now, host), kind, host, seq, 0)

        def up(now: float, host: int, kind: str, seq: int, mark: int = 0) -> None:
            events.push(self.uplinks.send(now, host), kind, host, seq, mark)

        def send_allowed(now: float, host: int) -> None:
            for c in windows.sendable(host):  # each carries the lowest chunk its worker still waits for
                up(now, host, "at_node", base[host // n] + c, base[host // n] + windows.low[host])

        for host in range(hosts):
            send_allowed(start_s[host], host)
        while events:
            now, kind, host, seq, mark = events.pop()
            job = host // n
            if kind == "at_node":
                self.low_seq[host] = max(self.low_seq[host], mark)
                slot, key = shared_slot(job + 1, seq, pool.pool_slots), (job, seq)
                if self.owner[slot] == key:
                    self.count[slot] += 1
                    if self.count[slot] == n:
                        for w in range(n):
                            down(now, job * n + w, "result", seq)
                elif key in self.spilled or not self.reclaimable(slot):
                    if key not in self.spilled:
                        self.spilled.add(key)
                        collisions += 1
                    down(now, job * n, "at_fallback", seq)  # the node's port to worker 0
                else:
                    self.owner[slot], self.count[slot] = key, 1
                    if n == 1:
                        down(now, host, "result", seq)
            elif kind == "at_fallback":
                fallback[(job, seq)] = fallback.get((job, seq), 0) + 1
                if fallback[(job, seq)] == n:
                    self.spilled.discard((job, seq))
                    events.push(now, "result", host, seq, 0)  # worker 0's own copy, on its host
                    for w in range(1, n):  # the others' through worker 0's link and the node
                        up(now, host, "via_node", seq, job * n + w)
            elif kind == "via_node":
                down(now, mark, "result", seq)
            else:  # a result at a worker
                if windows.result(now, host, seq - base[job]):
                    send_allowed(now, host)
        return SharedPass(tuple(windows.finish_s), chunks * pool.jobs, collisions)


def shared_allreduce_s(pool: SharedPool, chunks: int, exponent_packets: int, latency_s: float,
                       warmups: int = 1) -> tuple[float, float]:
    """(time of an iteration, share of its chunks summed by end hosts): the MAX round of exponents
    then the chunks, each after a round's α, following `warmups` iterations on the same node."""
    node = SharedNode(pool)
    hosts = pool.jobs * pool.workers
    start = 0.0
    for _ in range(warmups + 1):
        begin = (start + latency_s,) * hosts
        first = node.run_pass(exponent_packets, begin)
        second = node.run_pass(chunks, tuple(t + latency_s for t in first.finish_s))
        time_s, start = second.time_s - start, second.time_s
    total = first.chunks + second.chunks
    return time_s, (first.collisions + second.collisions) / max(1, total)

"""INA all-reduce under packet loss: a seeded event simulation of the workers' window protocol
(hosts/ina/client.py, with its own timer) through the node's reserved slots, where a lost chunk
holds its window until the chunk's retransmission timeout fires."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from testbed.network.events import EventQueue, FifoLinks
from testbed.shared.ina_rules import RetransmitTimer, WorkerWindows

# Points where a packet may be lost: on the worker's link into the node, in the node's pipeline,
# on the node's link back to a worker.
UPLINK, PIPELINE, DOWNLINK = "uplink", "pipeline", "downlink"
# A pass longer than this many chunks is simulated for this many and scaled: its time per chunk is
# steady long before, and a 1,024-GPU prediction must not wait on a million events.
MAX_SIMULATED_CHUNKS = 20_000
SAMPLED_CHUNKS, MAX_SAMPLES = 20_000, 16

LossFn = Callable[[str, int, int, int], bool]  # (point, worker, chunk, attempt) → lost?


@dataclass(frozen=True)
class InaProtocol:
    """The window protocol's parameters, in real-world seconds."""

    workers: int
    window: int  # chunks a worker may have outstanding
    frame_s: float  # one INA frame on a link
    min_rto_s: float  # the adaptive timeout's floor
    initial_rto_s: float


@dataclass(frozen=True)
class PassTimes:
    """One pass of `chunks` through the node: when each worker had every result, and the cost."""

    finish_s: tuple[float, ...]
    retransmits: int

    @property
    def time_s(self) -> float:
        return max(self.finish_s)


def random_loss(link_loss_frac: float, node_drop_frac: float, seed: int) -> LossFn:
    """Independent loss at each point, as the emulation injects it (iptables' statistic match on
    every link, a coin in the node's pipeline)."""
    rng = random.Random(seed)
    frac = {UPLINK: link_loss_frac, PIPELINE: node_drop_frac, DOWNLINK: link_loss_frac}

    def lost(point: str, worker: int, chunk: int, attempt: int) -> bool:
        return frac[point] > 0 and rng.random() < frac[point]

    return lost


def simulate_pass(protocol: InaProtocol, chunks: int, lost: LossFn, start_s: tuple[float, ...] | None = None,
                  timers: list[RetransmitTimer] | None = None) -> PassTimes:
    """Every worker sends chunk c once chunk c − window has its result; a FIFO link of frame_s per
    frame each way between every worker and the node; the node multicasts a chunk's result once all
    workers' contributions arrived, and answers a retransmission of a completed chunk with its
    result again (SwitchML's shadow copy); a worker retransmits a chunk whose result is late by its
    timeout, doubled for each retransmission (Karn), and times the round trip only of chunks it sent
    once and whose sum no retransmission completed."""
    n, window, frame_s = protocol.workers, protocol.window, protocol.frame_s
    start = start_s or (0.0,) * n
    timers = timers or [RetransmitTimer(protocol.initial_rto_s, protocol.min_rto_s) for _ in range(n)]
    uplinks, downlinks = FifoLinks(n, frame_s, list(start)), FifoLinks(n, frame_s)
    windows = WorkerWindows(n, chunks, window, start)
    first_sent = [[0.0] * chunks for _ in range(n)]
    attempts = [[0] * chunks for _ in range(n)]
    seen = [0] * chunks  # the node's bitmap of contributions per chunk
    complete = bytearray(chunks)
    late = bytearray(chunks)  # a retransmitted contribution completed it: its result is no RTT sample
    events = EventQueue()
    retransmits = 0

    def enqueue(now: float, w: int, c: int) -> None:
        events.push(uplinks.send(now, w), "at_node", w, c, attempts[w][c])

    def send_allowed(now: float, w: int) -> None:
        for c in windows.sendable(w):
            first_sent[w][c] = now
            enqueue(now, w, c)
            events.push(now + timers[w].rto_s, "timeout", w, c, 0)

    def result_to(now: float, w: int, c: int) -> None:
        events.push(downlinks.send(now, w), "at_worker", w, c, 0)

    for w in range(n):
        send_allowed(start[w], w)
    while events:
        now, kind, w, c, tag = events.pop()
        if kind == "at_node":
            if lost(UPLINK, w, c, tag) or lost(PIPELINE, w, c, tag):
                continue
            bit = 1 << w
            if complete[c]:
                if seen[c] & bit:
                    result_to(now, w, c)
            elif not seen[c] & bit:
                seen[c] |= bit
                late[c] |= tag > 0
                if seen[c] == (1 << n) - 1:
                    complete[c] = 1
                    for u in range(n):
                        result_to(now, u, c)
        elif kind == "at_worker":
            if lost(DOWNLINK, w, c, attempts[w][c]) or windows.done[w][c]:
                continue
            if attempts[w][c] == 0 and not late[c]:
                timers[w].sample(now - first_sent[w][c])
            windows.result(now, w, c)
            send_allowed(now, w)
        elif not windows.done[w][c] and tag == attempts[w][c]:  # the chunk's live timeout
            attempts[w][c] += 1
            retransmits += 1
            enqueue(now, w, c)
            events.push(now + timers[w].backoff(attempts[w][c]), "timeout", w, c, attempts[w][c])
    return PassTimes(tuple(windows.finish_s), retransmits)


def lossy_allreduce_s(protocol: InaProtocol, chunks: int, exponent_packets: int, latency_s: float,
                      link_loss_frac: float, node_drop_frac: float, seed: int,
                      samples: int | None = None) -> tuple[float, int]:
    """(mean time, mean retransmissions) of the two passes of a float32 INA all-reduce, the MAX
    round of exponents then the chunks, each after a round's α, over `samples` seeded draws (by
    default enough for SAMPLED_CHUNKS chunks in all: the mean of a few losses varies a lot)."""
    samples = samples or max(1, min(MAX_SAMPLES, round(SAMPLED_CHUNKS / max(1, chunks))))
    simulated = min(chunks, MAX_SIMULATED_CHUNKS)
    scale = chunks / simulated if simulated else 1.0
    total_s = total_retransmits = 0.0
    for k in range(samples):
        lost = random_loss(link_loss_frac, node_drop_frac, seed * 1_000_003 + k)
        timers = [RetransmitTimer(protocol.initial_rto_s, protocol.min_rto_s) for _ in range(protocol.workers)]
        # The workers' timers carry over from one iteration to the next (a run warms up first):
        # the iteration measured is the second one with the same timers.
        for _ in range(2):
            first = simulate_pass(protocol, exponent_packets, lost, (latency_s,) * protocol.workers, timers)
            second_start_s = min(first.finish_s) + latency_s
            second = simulate_pass(protocol, simulated, lost, tuple(t + latency_s for t in first.finish_s), timers)
        total_s += second_start_s + (second.time_s - second_start_s) * scale
        total_retransmits += first.retransmits + second.retransmits * scale
    return total_s / samples, round(total_retransmits / samples)

"""The worker side of INA: registers the job with the node's control plane, then all-reduces a
buffer chunk by chunk through the node with a window of outstanding slots and a per-chunk
retransmission timeout. float32 buffers are quantized (hosts.ina.quantize) after a MAX round that
agrees on each chunk's exponent; int32 buffers go as they are and come back exact, or raise
InaOverflow if a sum leaves int32. Worker 0 of a job with shared slots also runs the job's
end-host aggregator for chunks that collide in the node."""

from __future__ import annotations

import json
import math
import multiprocessing
import select
import socket
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from hosts.collectives import StepRecord
from hosts.ina import quantize as q
from hosts.ina.deparser import encode
from hosts.ina.fallback import EndHostAggregator
from hosts.ina.hold import LinkHold
from hosts.ina.parser import Drop, Header, parse_result
from hosts.ina.protocol import (
    CONTROL_PORT,
    DATA_PORT,
    ELEMENTS_PER_PACKET,
    FALLBACK_PORT,
    HEADER_BYTES,
    INT,
    MAX,
    OVERFLOW,
    RESULT,
    RETRANSMIT,
)
from testbed.model.schedule import CollectiveStep, Schedule
from testbed.shared.ina_rules import MIN_RTO_S, RetransmitTimer, WorkerWindows, shared_slot

MAX_RETRANSMITS_PER_CHUNK = 200
GIVE_UP_S = 10.0  # wall seconds a chunk may go unanswered before the collective fails...
# ...once it has also been sent this many times. Bad luck alone must not fail a run: with loss at
# three points on the way (the node's port, its pipeline, the worker's port) at 5% each, one
# attempt fails with p ≈ 0.14 (0.25 with the other workers' losses delaying the chunk's completion),
# and 30 failures in a row (0.25**30 ≈ 1e-18) stays below 1e-12 over the ~10**5 chunks of a run.
# A run of the lossy test needed up to 9 retransmissions, and a time limit alone failed it once.
MIN_RETRANSMITS_BEFORE_GIVING_UP = 30
REGISTER_TIMEOUT_S = 30.0
SOCKET_BUFFER_BYTES = 8 << 20


class InaError(RuntimeError):
    """The node refused the job or stopped answering."""


class InaOverflow(InaError):
    """An integer sum left the int32 range (the node flags it; the values would be clipped)."""


def job_ids(schedule: Schedule) -> dict[tuple[int, ...], int]:
    """Job id of every group that all-reduces with INA in a schedule: the same on every host."""
    groups = sorted({step.group for gpu in schedule.gpus for step in gpu.steps
                     if isinstance(step, CollectiveStep) and step.algorithm == "ina"})
    return {group: index + 1 for index, group in enumerate(groups)}


@dataclass
class JobClient:
    """One worker's view of one job; sequence numbers continue across calls, so slot copies and
    the node's low-water marks stay consistent from one iteration to the next."""

    endpoint: "InaEndpoint"
    job: int
    worker: int
    workers: tuple[str, ...]
    window: int
    sharing: str
    slot_base: int
    slot_count: int
    next_seq: int = 0
    counters: Counter = field(default_factory=Counter)
    timeout_wait_s: float = 0.0  # time spent waiting for a lost chunk's retransmission timeout

    def allreduce(self, data: np.ndarray, latency_s: float = 0.0) -> list[StepRecord]:
        """Sums `data` (float32 or int32) over the job's workers in place; returns its timing."""
        records = []
        if data.dtype == np.int32:
            records.append(self._timed("sum", 0, latency_s, lambda: self._aggregate(data, INT, None, data)))
            return records
        n = len(self.workers)
        exponents = q.chunk_exponents(data, ELEMENTS_PER_PACKET)
        agreed = np.empty_like(exponents)
        records.append(self._timed("exponents", 0, latency_s, lambda: self._aggregate(exponents, MAX, None, agreed)))
        agreed = np.clip(agreed, q.EXP_MIN, q.EXP_MAX)
        values = q.quantize(data, agreed, n, ELEMENTS_PER_PACKET)
        sums = np.empty_like(values)
        records.append(self._timed("sum", 1, latency_s, lambda: self._aggregate(values, 0, agreed, sums)))
        data[:] = q.dequantize(sums, agreed, n, ELEMENTS_PER_PACKET)
        return records

    def _timed(self, phase: str, step: int, latency_s: float, work) -> StepRecord:
        start = time.monotonic()
        if latency_s > 0:  # one message per round: the alpha of the alpha-beta model
            self.endpoint.latency_wait(latency_s)
        sent, received = work()
        return StepRecord(phase, step, None, None, sent, start, time.monotonic(), recv_bytes=received)

    def _packet(self, c: int, seq: int, flags: int, exponents, values: np.ndarray, low_seq: int) -> bytes:
        if self.sharing == "reserved":
            slot, ver = self.slot_base + seq % self.window, (seq // self.window) % 2
        else:
            slot, ver = shared_slot(self.job, seq, self.slot_count), 0
        chunk = values[c * ELEMENTS_PER_PACKET:(c + 1) * ELEMENTS_PER_PACKET]
        exp = int(exponents[c]) if exponents is not None else 0
        header = Header(self.job, self.worker, flags, slot, ver, exp, seq & 0xFFFFFFFF, low_seq & 0xFFFFFFFF,
                        1 << self.worker, chunk.size)
        return encode(header, chunk)

    def _aggregate(self, values: np.ndarray, flags: int, exponents, out: np.ndarray) -> tuple[int, int]:
        """One pass of `values` through the node into `out`; returns (bytes sent, bytes received)."""
        chunks = max(1, math.ceil(values.size / ELEMENTS_PER_PACKET))
        base, self.next_seq = self.next_seq, self.next_seq + chunks
        endpoint, window = self.endpoint, self.window
        windows = WorkerWindows(1, chunks, window, (0.0,))  # the window rule the oracle simulates
        done, low = windows.done[0], windows.low
        inflight: dict[int, list] = {}  # chunk → [deadline, retransmits, first sent at]
        remaining = chunks
        sent_bytes = received_bytes = 0
        timer = endpoint.timer
        while remaining:
            for c in windows.sendable(0):
                packet = self._packet(c, base + c, flags, exponents, values, base + low[0])
                endpoint.send(packet)
                sent_bytes += len(packet)
                now = time.monotonic()
                inflight[c] = [now + timer.rto_s, 0, now]
            now = time.monotonic()
            wait = min(entry[0] for entry in inflight.values()) - now
            got = endpoint.receive(max(wait, 0.0))
            if got is None:
                # Nothing came back before a chunk's timeout: this wait was the price of a loss.
                self.timeout_wait_s += time.monotonic() - now
                # a retransmission is the chunk again, flagged, with the worker's current low-water mark
                self._retransmit(inflight, timer, lambda c: self._packet(
                    c, base + c, flags | RETRANSMIT, exponents, values, base + low[0]))
                continue
            h, payload = got
            c = h.seq - base
            if h.job != self.job or not 0 <= c < chunks or done[c] or c not in inflight:
                self.counters["stale_results"] += 1
                continue
            if h.flags & OVERFLOW:
                raise InaOverflow(f"job {self.job}: the sum of chunk {c} (elements {c * ELEMENTS_PER_PACKET}.."
                                  f"{c * ELEMENTS_PER_PACKET + h.count - 1}) leaves the int32 range")
            entry = inflight[c]
            if entry[1] == 0 and not h.flags & RETRANSMIT:  # Karn: only chunks sent once, summed at once
                timer.sample(time.monotonic() - entry[2])
            start = c * ELEMENTS_PER_PACKET
            out[start:start + h.count] = payload
            received_bytes += HEADER_BYTES + payload.nbytes
            windows.result(0.0, 0, c)
            del inflight[c]
            remaining -= 1
        return sent_bytes, received_bytes

    def _retransmit(self, inflight: dict, timer: "RetransmitTimer", packet_of) -> None:
        now = time.monotonic()
        for c, entry in inflight.items():
            if entry[0] > now:
                continue
            entry[1] += 1
            waited = now - entry[2]
            if gives_up(entry[1] - 1, waited, self.endpoint.give_up_s):
                raise InaError(f"job {self.job}: chunk {c} got no result in {waited:.1f} s and {entry[1] - 1} "
                               f"retransmissions; the aggregation node is not answering (did it restart? its "
                               f"jobs and partial sums are gone)")
            self.endpoint.send(packet_of(c))
            entry[0] = now + timer.backoff(entry[1])
            self.counters["retransmits"] += 1


def gives_up(retransmits: int, waited_s: float, give_up_s: float) -> bool:
    """Whether a chunk sent `retransmits` extra times and unanswered for `waited_s` means the node
    is gone: both a long silence and enough attempts that loss alone is not a credible cause."""
    if retransmits >= MAX_RETRANSMITS_PER_CHUNK:
        return True
    return waited_s > give_up_s and retransmits >= MIN_RETRANSMITS_BEFORE_GIVING_UP


class InaEndpoint:
    """This worker's socket to the node, and its job clients."""

    def __init__(self, address: str, node: str, rto_s: float, latency_wait=None,
                 min_rto: float = MIN_RTO_S, give_up_s: float = GIVE_UP_S, link_rate_bps: float | None = None) -> None:
        self.give_up_s = give_up_s
        self.link_rate_bps = link_rate_bps  # the links' shaped frame rate: packets are held their frame time
        self.hold = LinkHold(link_rate_bps)
        self.address = address
        self.node = node
        self.timer = RetransmitTimer(rto_s, min_rto)
        self.latency_wait = latency_wait or time.sleep
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            self.sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER_BYTES)
        self.sock.bind((address, DATA_PORT))
        self._buffer = bytearray(65536)
        self.jobs: dict[int, JobClient] = {}
        self.dropped: Counter = Counter()
        self._fallbacks: list = []  # (process, pipe) of each end-host aggregator this worker runs
        self._fallback_counters: Counter = Counter()

    def send(self, packet: bytes) -> None:
        try:
            self.sock.sendto(packet, (self.node, DATA_PORT))
        except OSError:  # a full queue or a firewall drop: lost like on the wire, retransmitted
            self.dropped["send_errors"] += 1

    def receive(self, timeout_s: float) -> tuple[Header, np.ndarray] | None:
        """The next result, or None if none came within `timeout_s`; with a link hold, a result
        comes its frame time after it arrived (twice that from another worker, through the node)."""
        if not self.hold.active:
            self.sock.settimeout(timeout_s if timeout_s > 0 else 1e-6)
            try:
                size = self.sock.recv_into(self._buffer)
            except (socket.timeout, BlockingIOError):
                return None
            return self._result(memoryview(self._buffer)[:size], copy=True)
        deadline = time.monotonic() + max(timeout_s, 0.0)
        self.sock.settimeout(0.0)
        while True:
            now = time.monotonic()
            held = self.hold.pop_due(now)
            if held is not None:
                got = self._result(memoryview(held), copy=False)
                if got is not None:
                    return got
                continue
            due = self.hold.next_due_s()
            until = deadline if due is None else min(deadline, due)
            if now >= until and until == deadline:
                return None
            if select.select([self.sock], [], [], max(0.0, until - now))[0]:
                self._arrivals()

    def _arrivals(self) -> None:
        """Everything the socket holds, into the link hold, hops by where it came from."""
        while True:
            try:
                size, (source, _) = self.sock.recvfrom_into(self._buffer)
            except (BlockingIOError, socket.timeout):
                return
            hops = 1 if source == self.node else 0 if source == self.address else 2
            self.hold.add(time.monotonic(), size, bytes(self._buffer[:size]), hops)

    def _result(self, packet: memoryview, copy: bool) -> tuple[Header, np.ndarray] | None:
        try:
            h, payload = parse_result(packet)
        except Drop as drop:
            self.dropped[drop.reason] += 1
            return None
        if not h.flags & RESULT:
            self.dropped["not_a_result"] += 1
            return None
        return h, payload.copy() if copy else payload

    def register(self, job: int, worker: int, workers: tuple[str, ...], window: int) -> JobClient:
        """Programs the job in the node (every worker asks; the node answers all alike)."""
        reply = self._control({"op": "register", "job": job, "workers": list(workers), "window": window})
        if not reply.get("ok"):
            raise InaError(f"the aggregation node refused job {job}: {reply.get('error')}")
        client = JobClient(self, job, worker, workers, window, reply["sharing"], reply["slot_base"],
                           reply["slot_count"])
        self.jobs[job] = client
        if reply["sharing"] == "shared" and worker == 0:
            self._serve_fallback(EndHostAggregator(job, workers))
        return client

    def _control(self, request: dict) -> dict:
        deadline = time.monotonic() + REGISTER_TIMEOUT_S
        while True:
            try:
                with socket.create_connection((self.node, CONTROL_PORT), timeout=5.0) as conn:
                    conn.sendall(json.dumps(request).encode() + b"\n")
                    reply = b""
                    while not reply.endswith(b"\n"):
                        part = conn.recv(65536)
                        if not part:
                            break
                        reply += part
                    return json.loads(reply)
            except (ConnectionError, socket.timeout, OSError, ValueError):
                if time.monotonic() > deadline:
                    raise InaError(f"the aggregation node at {self.node}:{CONTROL_PORT} did not answer "
                                   f"within {REGISTER_TIMEOUT_S:.0f} s") from None
                time.sleep(0.05)

    def _serve_fallback(self, aggregator: EndHostAggregator) -> None:
        """The job's end-host aggregator runs in its own process on this host: a thread would wait
        for the interpreter lock behind this worker's own sending, and its chunks would time out."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER_BYTES)
        sock.bind((self.address, FALLBACK_PORT))  # bound here, so a port clash fails the registration
        parent, child = multiprocessing.get_context("fork").Pipe()
        process = multiprocessing.get_context("fork").Process(
            target=_fallback_loop, args=(sock, aggregator, child, LinkHold(self.link_rate_bps)), daemon=True)
        process.start()
        sock.close()
        child.close()
        self._fallbacks.append((process, parent))

    def counters(self) -> dict:
        out: Counter[str] = Counter()
        for client in self.jobs.values():
            out.update(client.counters)
        out.update({f"fallback_{k}": v for k, v in self._fallback_counters.items()})
        out.update({f"dropped_{k}": v for k, v in self.dropped.items()})
        # The adaptive timeout where the run ended (wall seconds): what a lost chunk waited for.
        timer = {"timer_rto_s": self.timer.rto_s, "timer_srtt_s": self.timer.srtt_s or 0.0,
                 "timer_rttvar_s": self.timer.rttvar_s}
        return {**out, **timer, "timeout_wait_s": sum(client.timeout_wait_s for client in self.jobs.values())}

    def close(self) -> None:
        """Stops the fallback aggregators (collecting their counters) and closes the socket."""
        for process, pipe in self._fallbacks:
            try:
                pipe.send("stop")
                if pipe.poll(5.0):
                    self._fallback_counters.update(pipe.recv())
            except (OSError, EOFError):
                pass
            process.join(timeout=5.0)
            if process.is_alive():
                process.kill()
        self._fallbacks.clear()
        self.sock.close()


def _fallback_loop(sock: socket.socket, aggregator: EndHostAggregator, control, hold: LinkHold) -> None:
    """The end-host aggregator's process: serves pieces (each its frame time after it arrived, with
    a link hold) until told to stop, then reports."""
    sock.settimeout(0.0)
    buffer = bytearray(65536)
    while not control.poll():
        if select.select([sock], [], [], hold.wait_s(time.monotonic(), 0.1))[0]:
            while True:
                try:
                    size = sock.recv_into(buffer)
                except (BlockingIOError, socket.timeout):
                    break
                if hold.active:
                    hold.add(time.monotonic(), size, bytes(buffer[:size]))
                else:
                    _piece(sock, aggregator, memoryview(buffer)[:size])
        now = time.monotonic()
        while (held := hold.pop_due(now)) is not None:
            _piece(sock, aggregator, memoryview(held))
    control.recv()
    control.send(dict(aggregator.counters))


def _piece(sock: socket.socket, aggregator: EndHostAggregator, packet: memoryview) -> None:
    try:
        h, values = parse_result(packet)
    except Drop:
        aggregator.counters["dropped_malformed"] += 1
        return
    for out, destination in aggregator.piece(h, values):
        try:
            sock.sendto(out, destination)
        except OSError:  # lost; the worker's retransmission asks again
            aggregator.counters["send_errors"] += 1

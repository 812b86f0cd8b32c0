"""INA's numbers and rules that the workers, the node and the oracle share: ports, packet sizes,
ATP's slot hash and the retransmission timer (RFC 6298 with Karn's backoff). No socket, no scapy:
hosts.ina.protocol checks its scapy layer against HEADER_BYTES."""

from __future__ import annotations

from collections.abc import Iterator

DATA_PORT = 47470  # workers → node and node → workers
CONTROL_PORT = 47471  # job registration (TCP, JSON lines) on the node
FALLBACK_PORT = 47472  # end-host aggregation of a job's colliding chunks (shared slots)

# One chunk fills a 1500-byte IP packet: 20 IP + 8 UDP + 26 INA + 360·4 payload = 1494 bytes.
ELEMENTS_PER_PACKET = 360
ELEMENT_BYTES = 4
HEADER_BYTES = 26  # the INA header (hosts.ina.protocol's layer, asserted there)
PAYLOAD_BYTES = ELEMENTS_PER_PACKET * ELEMENT_BYTES
# Frame bytes on the wire per full chunk: Ethernet 14, IPv4 20, UDP 8, INA header, payload.
FRAME_BYTES = 14 + 20 + 8 + HEADER_BYTES + PAYLOAD_BYTES

MIN_RTO_S = 2e-3  # wall time: below this, the hosts' scheduling jitter alone would time chunks out
MAX_BACKOFF_DOUBLINGS = 4


def default_rto_s(window: int, workers: int, host_rate_bps: float, node_packets_per_s: float) -> float:
    """Long against a full window queued behind the worker's link and every worker's window queued
    at the node, so only a lost packet times out."""
    queued_s = window * FRAME_BYTES * 8 / host_rate_bps + workers * window / node_packets_per_s
    return 3 * queued_s + 5e-3


def min_rto_s(window: int, host_rate_bps: float, timer_floor_s: float = MIN_RTO_S) -> float:
    """The floor of the adaptive timeout: the last chunk of a window sent at once waits for the
    whole window to leave the worker's link, whatever the round trip of the others was."""
    return max(timer_floor_s, 1.5 * window * FRAME_BYTES * 8 / host_rate_bps + timer_floor_s)


_MASK64 = (1 << 64) - 1


def shared_slot(job: int, seq: int, pool_slots: int) -> int:
    """ATP's hash of (job, sequence) onto the shared pool: splitmix64's finaliser, so every slot is
    as likely for every chunk. (A multiplicative hash taken mod a power of two is a fixed
    permutation of seq mod the pool, which made collisions between jobs depend on how their
    sequence numbers lined up to a fraction of a frame: 6-25% for the same two jobs.)"""
    x = ((job << 40) + seq) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (x ^ (x >> 31)) % pool_slots


class RetransmitTimer:
    """TCP's estimator (RFC 6298): the timeout follows the measured round trip of chunks, which
    includes the queue a full window builds, so a loss is noticed soon after the window drains."""

    def __init__(self, initial_s: float, min_s: float = MIN_RTO_S) -> None:
        self.rto_s = initial_s
        self.min_s = min_s
        self.srtt_s: float | None = None
        self.rttvar_s = 0.0

    def sample(self, rtt_s: float) -> None:
        if self.srtt_s is None:
            self.srtt_s, self.rttvar_s = rtt_s, rtt_s / 2
        else:
            self.rttvar_s = 0.75 * self.rttvar_s + 0.25 * abs(self.srtt_s - rtt_s)
            self.srtt_s = 0.875 * self.srtt_s + 0.125 * rtt_s
        self.rto_s = max(self.min_s, self.srtt_s + 4 * self.rttvar_s)

    def backoff(self, retransmits: int) -> float:
        """The timeout of a chunk sent `retransmits` times: doubled each time (Karn), so a slow
        path (the end-host fallback) is not flooded with copies of what it is still summing."""
        return self.rto_s * (1 << min(retransmits, MAX_BACKOFF_DOUBLINGS))


class WorkerWindows:
    """Every worker's window over one pass of `chunks` chunks, the rule the agents run (one worker
    each, hosts/ina/client.py) and the oracle simulates (all of them): a worker sends chunk c once
    c < window or chunk c − window has its result, and has finished when it holds every result.
    `low` is the first chunk each worker still waits for (what its packets carry)."""

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

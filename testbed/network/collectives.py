"""Alpha-beta costs of collectives and the prediction record every oracle model returns (pure)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from testbed.core.shaping import MTU_FRAME_BYTES, TCP_PAYLOAD_BYTES
from testbed.model.errors import InputError
from testbed.model.units import transfer_time_s
from testbed.shared.ina_rules import ELEMENTS_PER_PACKET, FRAME_BYTES, PAYLOAD_BYTES

WAITING_FIELDS = ("bubble_s", "waiting_tp_s", "waiting_pp_s", "waiting_dp_s", "waiting_ep_s")


@dataclass(frozen=True)
class Breakdown:
    compute_s: float = 0.0
    communication_s: float = 0.0
    reconfiguration_s: float = 0.0  # dark time of re-plans on the critical path
    retransmission_s: float = 0.0
    # Of the iteration, the time after the last compute ends: the DP all-reduce (and transfers)
    # that no compute hides. Part of communication_s and reconfiguration_s, not added to them.
    exposed_dp_s: float = 0.0
    # Schedules whose step ids name their parallelism (large models): of the last GPU to finish,
    # the time it waits for a pipeline stage that has not yet sent (the bubble) and for each
    # parallelism's communication. Parts of communication_s and reconfiguration_s.
    bubble_s: float = 0.0
    waiting_tp_s: float = 0.0
    waiting_pp_s: float = 0.0
    waiting_dp_s: float = 0.0
    waiting_ep_s: float = 0.0

    def to_json(self) -> dict[str, float]:
        waiting = {name: getattr(self, name) for name in WAITING_FIELDS if getattr(self, name)}
        return {
            "compute_s": self.compute_s,
            "communication_s": self.communication_s,
            "reconfiguration_s": self.reconfiguration_s,
            "retransmission_s": self.retransmission_s,
            "exposed_dp_s": self.exposed_dp_s,
            **waiting,
        }

    def describe(self) -> str:
        """The breakdown in one line of milliseconds."""
        parts = [("compute", self.compute_s), ("communication", self.communication_s),
                 ("dark time", self.reconfiguration_s), ("retransmissions", self.retransmission_s)]
        text = ", ".join(f"{name} {value * 1e3:.3f} ms" for name, value in parts if value or name != "retransmissions")
        waits = [(name, getattr(self, f)) for name, f in (("pipeline bubble", "bubble_s"), ("tp", "waiting_tp_s"),
                                                           ("pp", "waiting_pp_s"), ("dp", "waiting_dp_s"),
                                                           ("ep", "waiting_ep_s")) if getattr(self, f)]
        if waits:
            # Parts of communication and dark time: what the last GPU to finish waited for.
            text += "; of which waiting: " + ", ".join(f"{name} {value * 1e3:.3f} ms" for name, value in waits)
        elif self.exposed_dp_s:
            # Exposed time is part of communication and dark time, not a further term.
            text += f"; {self.exposed_dp_s * 1e3:.3f} ms of communication and dark time after the last compute"
        return text


@dataclass(frozen=True)
class Prediction:
    iteration_time_s: float
    breakdown: Breakdown
    formula: str

    def to_json(self) -> dict[str, object]:
        return {
            "predicted_iteration_time_s": self.iteration_time_s,
            "breakdown": self.breakdown.to_json(),
            "formula": self.formula,
        }


def ring_allreduce_time_s(hosts: int, size_bytes: float, rate_bps: float, latency_s: float) -> float:
    """2(n-1)·α + 2(n-1)/n · M/B (the source documents' formula): 2(n-1) steps, each one message of M/n bytes."""
    steps = 2 * (hosts - 1)
    return steps * latency_s + steps * transfer_time_s(size_bytes / hosts, rate_bps)


@dataclass(frozen=True)
class CollectiveCost:
    time_s: float
    smallest_message_bytes: float
    messages: int  # on the critical path
    formula: str


def collective_cost(op: str, algorithm: str, n: int, size_bytes: float, rate_bps: float,
                    latency_s: float) -> CollectiveCost:
    """Alpha-beta time of one collective among n GPUs, each with a buffer of `size_bytes` (M)."""
    M, a = size_bytes, latency_s
    def t(size: float) -> float:
        return transfer_time_s(size, rate_bps)

    rounds = math.ceil(math.log2(n)) if n > 1 else 0
    if (op, algorithm) == ("allreduce", "ring"):
        return CollectiveCost(ring_allreduce_time_s(n, M, rate_bps, a), M / n, 2 * (n - 1),
                              "2(n-1)·α + 2(n-1)/n·M/B")
    if (op, algorithm) == ("allreduce", "halving-doubling"):
        p2 = 1 << (n.bit_length() - 1)
        steps = 2 * int(math.log2(p2))
        time = steps * a + 2 * (p2 - 1) / p2 * t(M)
        formula = "2·log2(p)·α + 2(p-1)/p·M/B, p = 2^floor(log2 n)"
        if p2 != n:  # the n - p extra ranks fold their data in first and get the result back last
            time += 2 * (a + t(M))
            steps += 2
            formula += " + 2(α + M/B)"
        return CollectiveCost(time, M / p2, steps, formula)
    if (op, algorithm) == ("allreduce", "tree"):
        return CollectiveCost(2 * rounds * (a + t(M)), M, 2 * rounds, "2·ceil(log2 n)·(α + M/B)")
    if (op, algorithm) in (("reducescatter", "ring"), ("allgather", "ring")):
        return CollectiveCost((n - 1) * (a + t(M / n)), M / n, n - 1, "(n-1)·α + (n-1)/n·M/B")
    if (op, algorithm) in (("broadcast", "tree"), ("reduce", "tree")):
        return CollectiveCost(rounds * (a + t(M)), M, rounds, "ceil(log2 n)·(α + M/B)")
    if (op, algorithm) in (("gather", "direct"), ("scatter", "direct")):
        # The n-1 chunks travel at once and share the root's link.
        return CollectiveCost(a + t((n - 1) * M / n), M / n, 1, "α + (n-1)/n·M/B")
    if (op, algorithm) == ("alltoall", "ring"):
        return CollectiveCost((n - 1) * (a + t(M / n)), M / n, n - 1, "(n-1)·(α + M/(n·B))")
    if (op, algorithm) == ("sendrecv", "ring"):
        return CollectiveCost(a + t(M), M, 1, "α + M/B")
    raise InputError(f"no alpha-beta model for {op} with algorithm {algorithm}")


def ina_packets(size_bytes: float) -> tuple[int, int]:
    """(chunks, packets of the chunks' exponents) of an INA all-reduce of `size_bytes`."""
    chunks = max(1, math.ceil(size_bytes / PAYLOAD_BYTES))
    return chunks, math.ceil(chunks / ELEMENTS_PER_PACKET)


def ina_payload_equivalent_bytes(size_bytes: float) -> float:
    """The TCP payload bytes that take a link as long as an INA all-reduce's frames each way: the
    link carries rate·1514/1448 bits/s of frames, and INA frames are FRAME_BYTES per chunk."""
    chunks, exponent_packets = ina_packets(size_bytes)
    return (chunks + exponent_packets) * FRAME_BYTES * TCP_PAYLOAD_BYTES / MTU_FRAME_BYTES


# An INA chunk's result is back two frame times after the chunk left (one up, one down; the link's
# latency is paid once per round, as below): a worker allowed fewer chunks outstanding idles its
# link while it waits.
FULL_RATE_WINDOW = 2


def ina_window_slowdown(window_chunks: int | None) -> float:
    """How many times longer an INA pass keeps the wire with `window_chunks` outstanding a worker."""
    return 1.0 if window_chunks is None else max(1.0, FULL_RATE_WINDOW / window_chunks)


def ina_allreduce_cost(n: int, size_bytes: float, rate_bps: float, latency_s: float,
                       worker_rate_bps: float | None = None, collision_frac: float = 0.0,
                       window_chunks: int | None = None) -> CollectiveCost:
    """INA all-reduce of float32 buffers: a MAX round of one exponent per chunk, then the chunks;
    each round one message (α), each worker sends M and receives M at once (full duplex), in INA
    packets whose header overhead differs from TCP's. `worker_rate_bps` caps the rate when the
    node aggregates slower than its ports (aggregation_gbps shared by all workers). With shared
    slots, a share f of the chunks collides and is summed by worker 0: its link then carries
    M·(1 + f·(n−1)) each way, and everyone waits for it. `window_chunks`: what each worker may
    have outstanding (the node's slots decide it); one chunk sends only every other frame time."""
    rate = min(rate_bps, worker_rate_bps) if worker_rate_bps else rate_bps
    slowdown = ina_window_slowdown(window_chunks)
    wire_s = transfer_time_s(ina_payload_equivalent_bytes(size_bytes), rate) * slowdown
    formula = "2·α + (M + M/P)·(INA frame/payload)/B, P elements per packet"
    if slowdown > 1:
        formula += f"; ×{slowdown:g}: a window of {window_chunks} chunk(s) idles the link while each result returns"
    if collision_frac:
        wire_s *= 1 + collision_frac * (n - 1)
        formula += f"; ×(1 + f·(n−1)) for the fallback host, f = {collision_frac:.3f}"
    return CollectiveCost(2 * latency_s + wire_s, size_bytes, 2, formula)

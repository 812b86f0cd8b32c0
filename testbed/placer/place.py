"""Placement (SiP-ML Algorithm 1): sub-ops onto one MP group of k GPUs on a circle, every data
dependency within circular distance r, earliest-available GPU first, lowest index on ties.

Forward sub-ops are placed by the algorithm; each backward sub-op runs on the GPU of its forward
part, where its weights and activations are, so backward edges mirror forward ones."""

from __future__ import annotations

from dataclasses import dataclass

from testbed.model.errors import InputError
from testbed.model.units import US_PER_S, bits_to_bytes, gbps_to_bps
from testbed.placer.balance import BalancedOp, inputs_of

MAX_FIX_PASSES = 200
# Mixed-precision Adam keeps fp16 weights and gradients plus fp32 master weights, momentum and
# variance: 16 bytes per parameter, i.e. 8× the fp16 parameter bytes.
TRAINING_STATE_PER_PARAM_BYTE = 8


class PlacementError(InputError):
    """No placement satisfies the degree constraint for these inputs."""


@dataclass(frozen=True)
class MpPlacement:
    """Where (GPU within the MP group) and when (µs from iteration start) each sub-op runs."""

    k: int
    radius: int
    ops: tuple[BalancedOp, ...]
    gpu: tuple[tuple[int, ...], ...]  # gpu[op][part]
    start_us: tuple[tuple[float, ...], ...]
    end_us: tuple[tuple[float, ...], ...]


def circular_distance(a: int, b: int, k: int) -> int:
    d = (a - b) % k
    return min(d, k - d)


def mp_radius(degree: int | None, k: int, dp_groups: int) -> int:
    """Largest circular distance MP traffic may span: the DP ring takes one of the D peers.

    A radius r reaches min(k - 1, 2r) peers; a budget of k - 1 peers or more is the full mesh,
    radius k // 2, even where 2·(k // 2) exceeds the budget (k even: the peer k/2 away is one)."""
    if degree is None:
        return k // 2
    budget = degree - (1 if dp_groups > 1 else 0)
    if budget < 1 and k > 1:
        raise PlacementError(f"degree {degree} leaves no peer for model parallelism after the DP ring; "
                             f"raise the degree or use mp=1")
    if k <= 1:
        return 0
    return k // 2 if budget >= k - 1 else min(k // 2, budget // 2)


class _Placer:
    def __init__(self, ops: list[BalancedOp], k: int, radius: int, bytes_per_us: float,
                 memory_limit_bytes: float) -> None:
        self.ops, self.k, self.radius, self.bytes_per_us = ops, k, radius, bytes_per_us
        self.memory_limit = memory_limit_bytes
        self.memory = [0.0] * k
        everyone = (1 << k) - 1
        if radius >= k // 2:
            self.window = [everyone] * k
        else:
            self.window = [sum(1 << ((g + d) % k) for d in range(-radius, radius + 1)) for g in range(k)]
        self.gpu: list[list[int]] = [[-1] * op.parts for op in ops]
        # Under a degree short of the full mesh the chain of ops can only move a GPU or so per op, and
        # "earliest available" keeps it where it started (the Transformer at k = 8, D = 3 ran on 4 of 8
        # GPUs). So each forward op aims at a GPU that walks once around the circle in proportion to
        # the forward compute before it, parts on consecutive GPUs from there: every GPU gets about
        # 1/k of the work. None: the full mesh, where earliest available spreads the work by itself.
        self.target: list[int] | None = None
        if radius < k // 2:
            work = [op.part_us * op.parts if op.self_parent is None else 0.0 for op in ops]
            total, before, self.target = sum(work) or 1.0, 0.0, []
            for w in work:
                self.target.append(min(k - 1, int(before / total * k)))
                before += w
        # Inputs per (op, part), computed once: the fix passes revisit them often.
        self.inputs = [[[(q, p, b) for q in op.parents for p, b in inputs_of(ops[q], op, c)]
                        for c in range(op.parts)] for op in ops]

    def candidates(self, i: int, c: int) -> int:
        mask = (1 << self.k) - 1
        for q, p, _ in self.inputs[i][c]:
            mask &= self.window[self.gpu[q][p]]
        return mask

    def _pull(self, q: int, p: int, toward: int) -> None:
        """Move sub-op (q, p) along the circle until it is within the radius of GPU `toward`."""
        here = self.gpu[q][p]
        forward = (toward - here) % self.k
        step = 1 if forward <= self.k - forward else -1
        while circular_distance(here, toward, self.k) > self.radius:
            here = (here + step) % self.k
        self.gpu[q][p] = here

    def _repair(self, i: int, c: int, avail: list[float]) -> int:
        """Parents too far apart for (i, c): put it at the GPU closest to all of them, then pull the
        offending parents (and, backwards, their ancestors) within range."""
        parents = self.inputs[i][c]
        spots = {self.gpu[q][p] for q, p, _ in parents}
        target = min(range(self.k), key=lambda g: (max(circular_distance(g, s, self.k) for s in spots), avail[g], g))
        queue = [(q, p, target) for q, p, _ in parents]
        while queue:
            q, p, toward = queue.pop()
            if circular_distance(self.gpu[q][p], toward, self.k) <= self.radius:
                continue
            self._pull(q, p, toward)
            queue.extend((qq, pp, self.gpu[q][p]) for qq, pp, _ in self.inputs[q][p])
        return target

    def place(self) -> None:
        avail = [0.0] * self.k
        end = [[0.0] * op.parts for op in self.ops]
        for i, op in enumerate(self.ops):
            for c in range(op.parts):
                mask = self.candidates(i, c)
                if op.self_parent is not None:
                    # Backward runs where its forward part ran: the weights and activations live there,
                    # and every backward edge mirrors a forward edge already within range.
                    g = self.gpu[op.self_parent][c]
                elif mask:
                    # Earliest available among candidates with memory to spare (else the emptiest).
                    need = memory_need(op)
                    aim = None if self.target is None else (self.target[i] + c) % self.k
                    g = min((g for g in range(self.k) if mask >> g & 1),
                            key=lambda g: (self.memory[g] + need > self.memory_limit,
                                           0 if aim is None else circular_distance(g, aim, self.k), avail[g], g))
                else:
                    g = self._repair(i, c, avail)
                self.gpu[i][c] = g
                self.memory[g] += memory_need(op)
                ready = max((end[q][p] + (0.0 if self.gpu[q][p] == g else b / self.bytes_per_us)
                             for q, p, b in self.inputs[i][c]), default=0.0)
                start = max(ready, avail[g])
                end[i][c] = avail[g] = start + op.part_us
        self._fix()

    def _fix(self) -> None:
        """Pulls can strand earlier children of a moved op: sweep until every dependency is in range."""
        for _ in range(MAX_FIX_PASSES):
            changed = False
            for i, op in enumerate(self.ops):
                for c in range(op.parts):
                    if op.self_parent is not None:
                        self.gpu[i][c] = self.gpu[op.self_parent][c]
                        continue
                    here = self.gpu[i][c]
                    mask = self.candidates(i, c)
                    if mask >> here & 1:
                        continue
                    changed = True
                    if mask:
                        self.gpu[i][c] = min((g for g in range(self.k) if mask >> g & 1),
                                             key=lambda g: (circular_distance(g, here, self.k), g))
                    else:
                        self.gpu[i][c] = self._repair(i, c, [0.0] * self.k)
            if not changed:
                return
        raise PlacementError(f"placement did not converge within radius {self.radius} on {self.k} GPUs")

    def timed(self) -> MpPlacement:
        """Replay the final assignment in topological order to get consistent start/end times."""
        avail = [0.0] * self.k
        start = [[0.0] * op.parts for op in self.ops]
        end = [[0.0] * op.parts for op in self.ops]
        for i, op in enumerate(self.ops):
            for c in range(op.parts):
                g = self.gpu[i][c]
                ready = max((end[q][p] + (0.0 if self.gpu[q][p] == g else b / self.bytes_per_us)
                             for q, p, b in self.inputs[i][c]), default=0.0)
                start[i][c] = max(ready, avail[g])
                end[i][c] = avail[g] = start[i][c] + op.part_us
        return MpPlacement(self.k, self.radius, tuple(self.ops), tuple(tuple(g) for g in self.gpu),
                           tuple(tuple(s) for s in start), tuple(tuple(e) for e in end))


def memory_need(op: BalancedOp) -> float:
    """Device memory one sub-op pins: its share of the training state and, forward, its activations."""
    if op.op.backward:
        return 0.0
    kept = op.out_bytes / op.parts if op.op.keeps_activation else 0.0
    return op.part_param_bytes * TRAINING_STATE_PER_PARAM_BYTE + kept


def place_mp_group(ops: list[BalancedOp], k: int, radius: int, gpu_bandwidth_gbps: float = 1000.0,
                   memory_limit_bytes: float = float("inf")) -> MpPlacement:
    """Place one MP group. `gpu_bandwidth_gbps` only estimates transfer times while choosing GPUs."""
    bytes_per_us = bits_to_bytes(gbps_to_bps(gpu_bandwidth_gbps)) / US_PER_S
    placer = _Placer(ops, k, radius, bytes_per_us, memory_limit_bytes)
    placer.place()
    return placer.timed()

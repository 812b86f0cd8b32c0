"""The planner core that circuit (SiP-OCS) and wavelength (SiP-Ring) planning share: links are
counted per ordered GPU pair, each of one unit rate; a plan is judged by its longest transfer; the
integer programme of SiP-ML §A.2 (maximise the slowest pair's links per byte under capacity
groups: ports, fibre segments) is solved exactly; and a re-plan is worth making only when it gains more
than its dark time. Each kind says what its groups are and how its links are realised."""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from testbed.model.units import transfer_time_s

Pair = tuple[int, int]  # (source GPU, destination GPU)


# A measured estimate is planned at this resolution (steps per doubling of a pair's bytes): finer
# differences are counter noise, and equal estimates then get one plan (layers repeat).
ESTIMATE_STEPS_PER_OCTAVE = 4


# TCP acknowledges at about 66 bytes per one or two 1,448-byte segments, 2-5% of the payload it
# acknowledges: a pair moving no more than this share of its reverse pair's bytes is (as far as a
# byte counter can tell) only acknowledging.
ACKNOWLEDGEMENT_SHARE = 0.1


def payload_demand(measured: Mapping[Pair, float]) -> dict[Pair, float]:
    """Measured bytes per pair without the pairs that only carry the reverse pair's
    acknowledgements. The schedule's traffic (what the oracle re-plans from) has none; planning on
    them gave acknowledgements their own wavelengths and retuned whenever a relayed pair's
    acknowledgements showed up, where the oracle stood still (a tree reduce on 8 GPUs of SiP-Ring
    emulated at 0.72 of its prediction with 9 retunes the prediction did not make)."""
    return {(a, b): v for (a, b), v in measured.items()
            if v > 0 and v > ACKNOWLEDGEMENT_SHARE * measured.get((b, a), 0.0)}


def quantised(demand: Mapping[Pair, float]) -> dict[Pair, float]:
    """A traffic estimate rounded to ESTIMATE_STEPS_PER_OCTAVE steps per doubling (what the
    controller and the oracle both plan from); pairs without bytes left out."""
    steps = ESTIMATE_STEPS_PER_OCTAVE
    return {p: 2.0 ** (round(math.log2(v) * steps) / steps) for p, v in demand.items() if v > 0}


def longest_s(demand: Mapping[Pair, float], links: Mapping[Pair, float], unit_bps: float) -> float:
    """The longest transfer of `demand` (bytes per pair) over `links` per pair; a pair with demand
    and no link never finishes (infinite)."""
    return max((transfer_time_s(size, links[p] * unit_bps) if links.get(p) else float("inf")
                for p, size in demand.items() if size > 0), default=0.0)


@dataclass(frozen=True)
class Solved:
    counts: dict[Pair, int]  # links per pair (pairs with none left out)
    bound_z: float  # the programme's optimum z (links per byte of the heaviest demand)
    scale: float  # the heaviest demand's bytes: z is in links per `scale` bytes

    @property
    def bound_per_byte(self) -> float:
        return self.bound_z / self.scale


# Below this many links a pair's count is taken to meet z·d exactly (the candidates' rounding).
_ROUNDING = 1e-9


def max_min_links(demand: Mapping[Pair, float], pairs: Sequence[Pair], groups: Sequence[Sequence[int]],
                  capacity: int, floor: Sequence[int] | None = None, ceiling: int | None = None) -> Solved | None:
    """Links per pair (integers, each pair of `pairs` between `floor` and `ceiling`) maximising z,
    the slowest demand's links per byte, where each group (indices into `pairs`) holds at most
    `capacity` links; then spare links one at a time to the pair whose transfer is longest, as
    long as its groups have room. None when no plan gives every demand a link.

    Exact without a solver: the fewest links that meet a z, max(floor, ceil(z·d)), only grow with
    z, and the links only fill groups, so the z a plan meets is feasible exactly below the optimum,
    which is one of the values k/d (k links for the pair that sets it): a binary search over them."""
    index = {p: i for i, p in enumerate(pairs)}
    scale = max(demand.values())
    top = capacity if ceiling is None else min(capacity, ceiling)
    members = np.array([i for group in groups for i in group], dtype=np.int64)
    rows = np.repeat(np.arange(len(groups)), [len(group) for group in groups])
    low = np.zeros(len(pairs)) if floor is None else np.asarray(floor, dtype=float)
    asking = np.array([index[p] for p in demand], dtype=np.int64)
    share = np.array([size / scale for size in demand.values()])

    def fewest(z: float) -> np.ndarray:
        # At least one link for every demand (any z > 0 asks it): the rounding's allowance must
        # not round a demand a millionth of the heaviest down to none.
        counts = low.copy()
        counts[asking] = np.maximum(counts[asking], np.maximum(1.0, np.ceil(z * share - _ROUNDING)))
        return counts

    def load(counts: np.ndarray) -> np.ndarray:
        return np.bincount(rows, weights=counts[members], minlength=len(groups))

    def fits(counts: np.ndarray) -> bool:
        return bool(counts.max(initial=0.0) <= top and (load(counts) <= capacity).all())

    candidates = np.unique(np.arange(1, top + 1)[None, :] / share[:, None])
    low_i, high_i = -1, len(candidates) - 1  # candidates[:low_i + 1] are met, beyond high_i not
    while low_i < high_i:
        mid = (low_i + high_i + 1) // 2
        if fits(fewest(candidates[mid])):
            low_i = mid
        else:
            high_i = mid - 1
    if low_i < 0:
        return None
    z = float(candidates[low_i])
    counts = _spread(fewest(z), share, asking, rows, members, capacity - load(fewest(z)), top)
    return Solved({p: int(counts[i]) for p, i in index.items() if counts[i] > 0}, z, scale)


def _spread(counts: np.ndarray, share: np.ndarray, asking: np.ndarray, rows: np.ndarray, members: np.ndarray,
            room: np.ndarray, top: int) -> np.ndarray:
    """Spare links one at a time to the demand whose transfer is longest (bytes per link), while
    each of its groups has room; a demand that cannot grow leaves the queue."""
    groups_of: dict[int, list[int]] = {}
    for row, member in zip(rows.tolist(), members.tolist()):
        groups_of.setdefault(member, []).append(row)
    left = room.tolist()
    held = counts.tolist()
    bytes_of = dict(zip(asking.tolist(), share.tolist()))
    queue = [(-size / held[i], i) for i, size in bytes_of.items()]
    heapq.heapify(queue)
    while queue:
        _, i = heapq.heappop(queue)
        mine = groups_of.get(i, [])
        if held[i] < top and all(left[g] >= 1 for g in mine):
            held[i] += 1
            for g in mine:
                left[g] -= 1
            heapq.heappush(queue, (-bytes_of[i] / held[i], i))
    return np.array(held)


def worth_retuning(demand: dict[Pair, float], held: dict[Pair, int], fresh: dict[Pair, int],
                   unit_bps: float, threshold_s: float) -> bool:
    """Whether the period's `demand` (bytes per pair) would finish sooner on the `fresh` plan than on
    the `held` one (links per pair, each of `unit_bps`) by more than `threshold_s` (at least the dark
    time the change costs; testbed.oracle.retune_threshold picks it).
    A pair neither plan links relays either way and is left out; a pair only one plan links relays
    on the other, counted at RELAYED_LINKS. Re-planning on every period's noise instead picks among
    equally good plans at random and darkens links for nothing."""
    if {p: c for p, c in held.items() if c} == {p: c for p, c in fresh.items() if c}:
        return False
    linked = {p: size for p, size in demand.items() if held.get(p) or fresh.get(p)}
    return (longest_s(linked, _relaying(fresh, linked), unit_bps) + threshold_s
            < longest_s(linked, _relaying(held, linked), unit_bps))


# A pair a plan does not link relays through GPUs over other pairs' links, sharing each hop with
# that link's own pair: counted as half a link. Counting it as never finishing made any pair the
# plan in force relays (a relayed flow's acknowledgements, a phase's stray message) worth a retune
# whatever it carried.
RELAYED_LINKS = 0.5


def _relaying(links: Mapping[Pair, float], pairs: Mapping[Pair, float]) -> dict[Pair, float]:
    return {p: links.get(p) or RELAYED_LINKS for p in pairs}

"""The planner core that circuit (SiP-OCS) and wavelength (SiP-Ring) planning share: links are
counted per ordered GPU pair, each of one unit rate; a plan is judged by its longest transfer; the
integer programme of SiP-ML §A.2 in linear form maximises the slowest pair's links per byte under
capacity groups (ports, fibre segments); and a re-plan is worth making only when it gains more
than its dark time. Each kind says what its groups are and how its links are realised."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

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
    bound_z: float  # the programme's upper bound on z (links per byte of the heaviest demand)
    scale: float  # the heaviest demand's bytes: z is in links per `scale` bytes

    @property
    def bound_per_byte(self) -> float:
        return self.bound_z / self.scale


def max_min_links(demand: Mapping[Pair, float], pairs: Sequence[Pair], groups: Sequence[Sequence[int]],
                  capacity: float, time_limit_s: float, floor: Sequence[float] | None = None,
                  ceiling: float = np.inf, spread_spare: bool = False) -> Solved | None:
    """Links per pair (integers, each pair of `pairs` between `floor` and `ceiling`) maximising z,
    the slowest demand's links per byte, where each group (indices into `pairs`) holds at most
    `capacity` links. `spread_spare` then holds z and maximises the demand-weighted total, so
    spare capacity goes where bytes are. None when the solver finds no solution in time."""
    index = {p: i for i, p in enumerate(pairs)}
    n = len(pairs)
    scale = max(demand.values())
    rows: list[np.ndarray] = []
    lower: list[float] = []
    upper: list[float] = []
    for pair, size in demand.items():  # c_p - z·d_p/scale >= 0
        row = np.zeros(n + 1)
        row[index[pair]], row[n] = 1.0, -size / scale
        rows.append(row)
        lower.append(0.0)
        upper.append(np.inf)
    for members in groups:
        row = np.zeros(n + 1)
        row[list(members)] = 1.0
        rows.append(row)
        lower.append(0.0)
        upper.append(capacity)
    low = np.zeros(n + 1)
    if floor is not None:
        low[:n] = floor
    high = np.full(n + 1, float(ceiling))
    high[n] = np.inf
    integrality = np.ones(n + 1)
    integrality[n] = 0
    constraints = LinearConstraint(np.array(rows), lower, upper)
    options = {"time_limit": time_limit_s}
    first = milp(-np.eye(n + 1)[n], constraints=constraints, integrality=integrality, bounds=Bounds(low, high),
                 options=options)
    if first.x is None:
        return None
    x, z = first.x, first.x[n]
    bound_z = -first.mip_dual_bound if first.mip_dual_bound is not None else z
    if spread_spare:
        if z <= 0:
            return None
        weights = np.array([demand.get(p, 0.0) / scale for p in pairs] + [0.0])
        low[n] = z * (1 - 1e-9)
        second = milp(-weights, constraints=constraints, integrality=integrality, bounds=Bounds(low, high),
                      options=options)
        x = second.x if second.x is not None else first.x
    return Solved({p: int(round(x[i])) for p, i in index.items() if round(x[i]) > 0}, float(bound_z), scale)


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

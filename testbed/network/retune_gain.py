"""When a re-plan is worth its dark time: the rule the controller and the oracle share for
re-planning fabrics (SiP-OCS multi-shot, SiP-Ring)."""

from __future__ import annotations

from testbed.model.units import transfer_time_s

Pair = tuple[int, int]


def worth_retuning(demand: dict[Pair, float], held: dict[Pair, int], fresh: dict[Pair, int],
                   unit_bps: float, dark_s: float) -> bool:
    """Whether the period's `demand` (bytes per pair) would finish sooner on the `fresh` plan than on
    the `held` one (links per pair, each of `unit_bps`) by more than the `dark_s` the change costs.
    A pair neither plan links relays either way and is left out; a pair only one plan links makes
    the other unbounded. Re-planning on every period's noise instead picks among equally good plans
    at random and darkens links for nothing."""
    def longest(links: dict[Pair, int]) -> float:
        return max((transfer_time_s(size, links[p] * unit_bps) if links.get(p) else float("inf")
                    for p, size in demand.items() if size > 0 and (held.get(p) or fresh.get(p))), default=0.0)

    if {p: c for p, c in held.items() if c} == {p: c for p, c in fresh.items() if c}:
        return False
    return longest(fresh) + dark_s < longest(held)

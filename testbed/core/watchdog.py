"""Progress of a run from the agents' progress lines, when a run counts as stalled, and the one
sentence that says who waits for whom when it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from testbed.model.schedule import cut_pairs
from testbed.shared.progress_lines import parse_progress

STALL_MIN_S = 10.0  # never call a run stalled sooner: start-up and a slow round on a busy machine
STALL_ROUNDS = 3.0  # a round that takes this many times its expected wall time has stalled
LOSSY_STALL_S = 60.0  # with loss injected (see stall_bound_s)
START_UP_S = 30.0  # agents start, import and connect (their own timeout), on the reference machine
LISTED_WAITS = 6  # waits named in the sentence; the rest are in the hosts' waiting files


@dataclass(frozen=True)
class Progress:
    """Rounds (warm-ups included) each rank has finished, from the progress file's lines
    (testbed.shared.progress_lines)."""

    rounds_done: tuple[int, ...]
    lines: int

    @classmethod
    def parse(cls, text: str, ranks: int) -> "Progress":
        return cls((0,) * ranks, 0).extended(text)

    def extended(self, text: str) -> "Progress":
        """This progress with more lines of the file (read from where the last read ended)."""
        ranks = len(self.rounds_done)
        done = list(self.rounds_done)
        lines = self.lines
        for rank, round_, _ in parse_progress(text):
            if rank < ranks:
                done[rank] = max(done[rank], round_ + 1)
                lines += 1
        return Progress(tuple(done), lines)

    def iterations_done(self, warmups: int) -> int:
        """Measured iterations every rank has finished."""
        return max(0, min(self.rounds_done, default=0) - warmups)


def connect_timeout_s(slowness: float = 1.0) -> float:
    """How long an agent waits for its peers to listen, on a machine `slowness` times slower than the
    reference one (the calibration's): 8 agents took 74 s to import and connect inside the
    software-emulated VM, whose calibration measured 33.9 times the reference step."""
    return START_UP_S * max(1.0, slowness)


def start_up_bound_s(slowness: float = 1.0) -> float:
    """Wall seconds from the agents' launch until every one has connected before the run counts as
    stalled: longer than the agents' own connect timeout, whose error names the peer that never
    listened."""
    return connect_timeout_s(slowness) + STALL_MIN_S


def stall_bound_s(round_wall_s: float, first_round: bool, lossy: bool = False) -> float:
    """Wall seconds without any rank finishing a round before the run counts as stalled. With loss
    injected, rounds wait out retransmission timeouts the prediction leaves out, and the protocols
    detect a dead peer themselves (INA workers give up after 10 s without an answer): the bound
    is then at least LOSSY_STALL_S. The first round (timed from when every rank connected) gets
    START_UP_S more: it pays once for what later rounds reuse (connections' first windows, shells)."""
    bound = max(STALL_MIN_S, STALL_ROUNDS * round_wall_s)
    if lossy:
        bound = max(bound, LOSSY_STALL_S)
    return bound + (START_UP_S if first_round else 0.0)


def _wait_phrase(report: dict[str, Any]) -> str:
    where = report.get("step") or "?"
    if report.get("warmup"):
        where = f"{where} (warm-up round {report['round']})"
    elif report.get("iteration") is not None:
        where = f"{where} of iteration {report['iteration']}"
    waits = report.get("waits") or []
    if not waits:
        return f"rank {report['rank']} is in {where}, waiting on no peer"
    longest = max(waits, key=lambda w: w.get("for_s", 0.0))
    verb = {"receive": "to receive from", "send completion": "for its send to be delivered to",
            "connection": "to connect to"}.get(longest["what"], f"for {longest['what']} with")
    return f"rank {report['rank']} waits in {where} {verb} rank {longest['peer']} ({longest.get('for_s', 0):.0f} s)"


def _cut_paths(reports: list[dict[str, Any]], reconfigurations: list[dict[str, Any]]) -> list[str]:
    """Reconfigurations that left no path for a pair a waiting rank needs (both ways: TCP acknowledges)."""
    waited = [(wait["peer"], report["rank"]) for report in reports for wait in report.get("waits") or []]
    found = []
    for event in reconfigurations:
        cut = cut_pairs(event.get("unreachable") or [], waited)
        if cut:
            pairs = ", ".join(f"GPU {s} to GPU {d}" for s, d in sorted(cut)[:3])
            found.append(f"reconfiguration {event.get('id')} (from {event.get('source', '?')}) left no path from "
                         f"{pairs}")
    return found[-1:]  # the latest one is the plan in force


def describe_stall(stalled_for_s: float, bound_s: float, reports: dict[int, dict[str, Any] | None],
                   reconfigurations: list[dict[str, Any]], starting: list[int] | None = None) -> str:
    """One sentence: how long nothing moved, which ranks wait on which step and peer, and the
    reconfiguration that cut a needed path, if one did."""
    answered = [r for r in reports.values() if r is not None]
    silent = sorted(rank for rank, r in reports.items() if r is None)
    # The longest waits first: the rank that has waited longest is nearest the cause.
    answered.sort(key=lambda r: -max((w.get("for_s", 0.0) for w in r.get("waits") or []), default=0.0))
    phrases = [_wait_phrase(r) for r in answered[:LISTED_WAITS]]
    if len(answered) > LISTED_WAITS:
        phrases.append(f"{len(answered) - LISTED_WAITS} more ranks wait too (hosts/h*.waiting.json)")
    if starting:
        phrases.append(f"rank{'s' if len(starting) > 1 else ''} {', '.join(map(str, starting))} never got past "
                       f"start-up")
    if silent:
        phrases.append(f"rank{'s' if len(silent) > 1 else ''} {', '.join(map(str, silent))} did not say")
    cause = _cut_paths(answered, reconfigurations)
    sentence = (f"no rank finished a round for {stalled_for_s:.0f} s (the bound is {bound_s:.0f} s): "
                + "; ".join(phrases))
    return sentence + (f"; {cause[0]}" if cause else "")

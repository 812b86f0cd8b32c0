"""Pipeline schedules (pure): the order in which a stage runs its micro-batches' forward and
backward passes under GPipe, 1F1B and Megatron-LM's interleaved 1F1B, and where each pass's
activations and gradients go."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Pass:
    """A forward (F) or backward (B) pass of micro-batch `micro` through model chunk `chunk`."""

    phase: Literal["F", "B"]
    micro: int
    chunk: int = 0


def stage_passes(schedule: str, pp: int, stage: int, micro_batches: int, chunks: int = 1) -> list[Pass]:
    """Stage `stage`'s passes in the order it runs them.

    gpipe: every forward, then every backward, last micro-batch first (Huang et al., GPipe, 2019).
    1f1b: pp-stage-1 forwards, then one forward and one backward in turn, then the remaining
    backwards (Narayanan et al., PipeDream-Flush, 2021). interleaved: the same over `chunks` model
    chunks a stage holds, with Megatron-LM's warm-up of 2·(pp-stage-1) + (chunks-1)·pp passes (all of
    them where m = pp) (Narayanan et al., SC'21, §2.2)."""
    m = micro_batches
    if schedule == "gpipe":
        return [Pass("F", i) for i in range(m)] + [Pass("B", i) for i in reversed(range(m))]
    if schedule == "1f1b":
        warmup = min(pp - stage - 1, m)
        steady = [p for i in range(m - warmup) for p in (Pass("F", warmup + i), Pass("B", i))]
        return [Pass("F", i) for i in range(warmup)] + steady + [Pass("B", i) for i in range(m - warmup, m)]
    if schedule == "interleaved":
        total = m * chunks
        warmup = min((pp - stage - 1) * 2 + (chunks - 1) * pp, total)
        if m == pp:  # Megatron-LM runs every forward first then (its send/recv pairing needs it)
            warmup = total

        def virtual(k: int, phase: Literal["F", "B"]) -> Pass:
            in_group = k % (pp * chunks)
            chunk = in_group // pp
            micro = (k // (pp * chunks)) * pp + in_group % pp
            return Pass(phase, micro, chunk if phase == "F" else chunks - 1 - chunk)

        steady = [p for k in range(total - warmup) for p in (virtual(warmup + k, "F"), virtual(k, "B"))]
        return ([virtual(k, "F") for k in range(warmup)] + steady
                + [virtual(k, "B") for k in range(total - warmup, total)])
    raise ValueError(f"unknown pipeline schedule {schedule!r}")


def virtual_stage(stage: int, chunk: int, pp: int) -> int:
    """The place of (stage, chunk) along the model: chunk c of every stage comes before chunk c+1."""
    return chunk * pp + stage


def at_virtual_stage(index: int, pp: int) -> tuple[int, int]:
    """(stage, chunk) of the model's `index`-th piece."""
    return index % pp, index // pp

"""Search a large model's split (tp, pp, dp, micro-batch) for the fastest iteration that fits in
the device's memory, on the scenario's fabric, each candidate predicted as `predict` would."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pydantic import ValidationError

from testbed.model.errors import InputError
from testbed.model.scenario import Scenario
from testbed.workloads.llm.kind import KIND
from testbed.workloads.llm.memory import heaviest_stage
from testbed.workloads.llm.section import LlmWorkload

MICRO_BATCHES = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class Split:
    tp: int
    pp: int
    dp: int
    micro_batch: int
    iteration_s: float
    method: str
    memory_bytes: float
    bubble_s: float


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidates(workload: LlmWorkload, gpus: int) -> Iterator[LlmWorkload]:
    """Every split of `gpus` the model divides evenly, at the scenario's global batch and schedule."""
    base = workload.model_dump(mode="python", exclude_unset=True)
    for tp in _divisors(gpus):
        for pp in _divisors(gpus // tp):
            dp = gpus // (tp * pp)
            for micro in MICRO_BATCHES:
                parallel = {**base["parallel"], "tp": tp, "pp": pp, "dp": dp, "micro_batch": micro}
                try:
                    yield LlmWorkload.model_validate({**base, "parallel": parallel})
                except ValidationError:
                    continue  # not an even split of this model or batch


def search_splits(scenario: Scenario, gpus: int | None = None, top: int = 5,
                  on_candidate: Callable[[], None] = lambda: None) -> tuple[list[Split], int]:
    """The `top` fastest splits that fit, best first, and how many even splits did not fit."""
    workload = scenario.workload
    assert isinstance(workload, LlmWorkload)
    gpus = gpus or scenario.fabric.hosts
    fabric = scenario.fabric.model_copy(update={"hosts": gpus})
    found, too_big = [], 0
    for candidate in candidates(workload, gpus):
        on_candidate()
        memory = heaviest_stage(candidate)
        if memory.total() > candidate.memory_bytes():
            too_big += 1
            continue
        trial = scenario.model_copy(update={"fabric": fabric, "workload": candidate})
        predicted = KIND.predict(trial, candidate)
        par = candidate.parallel
        found.append(Split(par.tp, par.pp, par.dp, par.micro_batch, predicted.prediction.iteration_time_s,
                           predicted.method, memory.total(), predicted.prediction.breakdown.bubble_s))
    if not found:
        raise InputError(f"no split of {workload.model.name()} over {gpus} GPUs at global batch "
                         f"{workload.parallel.global_batch} fits in a {workload.device.name}'s memory "
                         f"({too_big} even splits tried); use more GPUs, recompute: full or parallel.zero")
    return sorted(found, key=lambda s: s.iteration_s)[:top], too_big

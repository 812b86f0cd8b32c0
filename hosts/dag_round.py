"""One round of a DAG schedule on a host (Chakra traces): a step starts once its dependencies are
done. Computes run one at a time on the host's compute thread, the lowest ready step first (a
GPU's compute stream); every transfer and collective runs on a thread of its own beside it, as
a GPU's communication streams do. The schedule oracle (testbed.oracle.schedule_sim) runs the same
rules."""

from __future__ import annotations

import heapq
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from testbed.model.schedule import Step

# What a finished step reports: its index, the collective's outcome (or None), any exception and
# when it ended (a collective: when its last message was delivered, which may be before its
# thread heard so; any other step: when it returned).
Done = tuple[int, Any, BaseException | None, float]
POLL_S = 0.5  # how often the waiting loop wakes (so that SIGTERM's Stopped gets through)


def ended_at(outcome: Any) -> float:
    """When a step that returned `outcome` ended: a collective's own end (when its last message was
    delivered, which may be before its thread heard so), else now."""
    return outcome["end_s"] if isinstance(outcome, dict) and "end_s" in outcome else time.monotonic()


class DagRound:
    """Runs `steps` once: `run_step(index)` does one step (blocking) and returns its outcome."""

    def __init__(self, steps: Sequence[Step], run_step: Callable[[int], Any]) -> None:
        self.steps = steps
        self.run_step = run_step
        index = {step.id: i for i, step in enumerate(steps)}
        self.waiting = [len(step.deps) for step in steps]
        self.dependants: list[list[int]] = [[] for _ in steps]
        for i, step in enumerate(steps):
            for dep in step.deps:
                self.dependants[index[dep]].append(i)
        self.done: queue.SimpleQueue[Done] = queue.SimpleQueue()
        self.ready_computes: list[int] = []
        self.computing = False
        self.compute_queue: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self.running: set[str] = set()
        self.ended_s = 0.0  # when the last step to end did

    def _do(self, index: int) -> None:
        try:
            outcome = self.run_step(index)
            self.done.put((index, outcome, None, ended_at(outcome)))
        except BaseException as error:  # reported to the waiting loop, which raises it there
            self.done.put((index, None, error, time.monotonic()))

    def _compute_loop(self) -> None:
        while (index := self.compute_queue.get()) is not None:
            self._do(index)

    def _start(self, index: int) -> None:
        self.running.add(self.steps[index].id)
        if self.steps[index].kind == "compute":
            heapq.heappush(self.ready_computes, index)
            self._next_compute()
        else:
            threading.Thread(target=self._do, args=(index,), daemon=True,
                             name=f"step {self.steps[index].id}").start()

    def _next_compute(self) -> None:
        if not self.computing and self.ready_computes:
            self.computing = True
            self.compute_queue.put(heapq.heappop(self.ready_computes))

    def run(self, position: dict) -> list[Any]:
        """Every step once; returns the outcomes of the collectives, in the order they ended."""
        threading.Thread(target=self._compute_loop, daemon=True, name="compute").start()
        outcomes = []
        try:
            for index, count in enumerate(self.waiting):
                if count == 0:
                    self._start(index)
            left = len(self.steps)
            while left:
                position["step"] = ", ".join(sorted(self.running)[:4]) + (" …" if len(self.running) > 4 else "")
                try:
                    index, outcome, error, ended = self.done.get(timeout=POLL_S)
                except queue.Empty:
                    continue
                if error is not None:
                    raise error
                left -= 1
                self.ended_s = max(self.ended_s, ended)
                self.running.discard(self.steps[index].id)
                if self.steps[index].kind == "compute":
                    self.computing = False
                    self._next_compute()
                elif outcome is not None:
                    outcomes.append(outcome)
                for later in self.dependants[index]:
                    self.waiting[later] -= 1
                    if self.waiting[later] == 0:
                        self._start(later)
        finally:
            self.compute_queue.put(None)
        return outcomes


def run_dag_round(steps: Sequence[Step], run_step: Callable[[int], Any], position: dict) -> tuple[list[Any], float]:
    """The round's collective outcomes and when its last step ended."""
    dag = DagRound(steps, run_step)
    outcomes = dag.run(position)
    return outcomes, dag.ended_s if steps else time.monotonic()

"""Search (k, l, global batch) for the lowest time-to-accuracy on a fabric (SiP-ML §4.2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from testbed.fabrics.all_kinds import behaviour
from testbed.model.errors import InputError
from testbed.model.fabric_section import FabricSection
from testbed.model.scenario import Scenario
from testbed.oracle.iteration import predict_plan
from testbed.placer.accuracy import AccuracyCurve, curve
from testbed.placer.plan import Plan, make_plan
from testbed.placer.profiles import DeviceProfile, device
from testbed.placer.settings import PlanSettings
from testbed.placer.zoo import MODELS, ModelGraph
from testbed.workloads.model.plan import plan_settings
from testbed.workloads.model.section import ModelWorkload, PlacedModel


@dataclass(frozen=True)
class Choice:
    k: int
    l: int
    global_batch: int
    iteration_s: float
    iterations: float
    breakdown: dict[str, float] = field(default_factory=dict, compare=False)  # of one iteration, seconds

    @property
    def time_to_accuracy_s(self) -> float:
        return self.iteration_s * self.iterations


class PlanCache:
    """Placements depend on the model, k, l, batch and degree, not on bandwidth: reuse them."""

    def __init__(self, graph: ModelGraph, device: DeviceProfile, settings: PlanSettings = PlanSettings()) -> None:
        self.graph, self.device, self.settings = graph, device, settings
        self._plans: dict[tuple[int, int, int, int | None], Plan | None] = {}

    def get(self, k: int, l: int, batch: int, degree: int | None) -> Plan | None:
        radius_key = None if degree is None or degree - (1 if l > 1 else 0) >= k else degree
        key = (k, l, batch, radius_key)
        if key not in self._plans:
            try:
                self._plans[key] = make_plan(self.graph, self.device, k, l, batch, degree,
                                             settings=self.settings)
            except InputError:
                self._plans[key] = None  # infeasible: out of memory or no placement
        return self._plans[key]


def compute_bound_s(plan: Plan) -> float:
    """No fabric beats the busiest GPU's compute: a lower bound on the iteration time."""
    busy = [0.0] * plan.k
    for i, op in enumerate(plan.placement.ops):
        for c in range(op.parts):
            busy[plan.placement.gpu[i][c]] += op.part_us
    return max(busy) / 1e6


@dataclass(frozen=True)
class SearchSpace:
    """What a search of a scenario's zoo model covers: its placements' cache, the GPUs, the fabric
    at that many GPUs, the MP sizes that divide them, and the candidates to look at."""

    cache: PlanCache
    gpus: int
    fabric: FabricSection
    ks: list[int]
    steps: int  # candidates (k, batch) the search walks through
    model: PlacedModel


def search_space(scenario: Scenario, gpus: int | None = None) -> SearchSpace:
    """The search space of the scenario's model on its fabric (at `gpus`, else fabric.hosts)."""
    workload = scenario.workload
    if not isinstance(workload, ModelWorkload) or workload.model.name not in MODELS:
        raise InputError(f"{scenario.name}: search needs a model workload naming a zoo model "
                         f"({', '.join(sorted(MODELS))})")
    if gpus is not None and gpus < 2:
        raise InputError(f"--gpus {gpus}: search needs at least 2 GPUs (leave it out for fabric.hosts)")
    hosts = gpus or scenario.fabric.hosts
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64) if hosts % k == 0]
    model = workload.model
    cache = PlanCache(MODELS[model.name](), device(model.device, model.efficiency), plan_settings(model))
    return SearchSpace(cache, hosts, scenario.fabric.model_copy(update={"hosts": hosts}), ks,
                       len(ks) * len(curve(model.name).batches), model)


def search(cache: PlanCache, gpus: int, fabric: FabricSection, ks: list[int] | None = None,
           batches: list[int] | None = None, on_step: Callable[[], None] = lambda: None,
           accuracy: AccuracyCurve | None = None) -> Choice:
    """The (k, l, batch) with the lowest time to accuracy (see `ranked`)."""
    return ranked(cache, gpus, fabric, ks, batches, on_step, accuracy, top=1)[0]


def ranked(cache: PlanCache, gpus: int, fabric: FabricSection, ks: list[int] | None = None,
           batches: list[int] | None = None, on_step: Callable[[], None] = lambda: None,
           accuracy: AccuracyCurve | None = None, top: int = 1) -> list[Choice]:
    """The `top` candidates by time to accuracy, best first. Candidates are evaluated in order of
    their compute-only bound, and the search stops once that bound alone is worse than the
    `top`-th best time found: the oracle runs only where it can matter. `accuracy` replaces the
    model's iterations-to-accuracy curve (sensitivity studies)."""
    data = accuracy or curve(cache.graph.name)
    ks = ks or [k for k in (1, 2, 4, 8, 16, 32) if gpus % k == 0]
    candidates = []
    for k in ks:
        l = gpus // k
        for batch in batches or data.batches:
            on_step()
            if batch % l:
                continue
            plan = cache.get(k, l, batch, behaviour(fabric.kind).degree(fabric))
            if plan is not None:
                candidates.append((compute_bound_s(plan) * data.iterations(batch), k, l, batch, plan))
    best: list[Choice] = []  # sorted, at most `top`
    for bound, k, l, batch, plan in sorted(candidates, key=lambda c: c[0]):
        worst = best[-1].time_to_accuracy_s if len(best) == top else float("inf")
        if bound >= worst:
            break
        try:
            prediction = predict_plan(plan, fabric, worst / data.iterations(batch))
        except ValueError:
            continue  # the fabric could not connect every pair this plan needs
        choice = Choice(k, l, batch, prediction.iteration_time_s, data.iterations(batch),
                        prediction.breakdown.to_json())
        if choice.time_to_accuracy_s < worst:
            best = sorted([*best, choice], key=lambda c: c.time_to_accuracy_s)[:top]
    if not best:
        raise InputError(f"no feasible (k, l, batch) for {cache.graph.name} on {gpus} GPUs of {fabric.kind}")
    return best

"""A `model` workload through SiP-ML's placer: the graph it places (zoo or the user's profile), the
settings its section chooses, the degree limit, and the schedule a run replays."""

from __future__ import annotations

from testbed.fabrics.all_kinds import behaviour
from testbed.model.errors import InputError
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.placer.emit import plan_schedule
from testbed.placer.plan import Plan, make_plan
from testbed.placer.profiles import device, load_user_profile
from testbed.placer.settings import PlanSettings
from testbed.placer.zoo import MODELS
from testbed.workloads.model.section import ModelWorkload, PlacedModel


def plan_settings(model: PlacedModel) -> PlanSettings:
    """The settings a scenario's `workload.model` section chooses."""
    return PlanSettings(model.dp_bucket_bytes, model.spatial_splits, model.split_pairing, model.gradient_precision)


def placement_degree(scenario: Scenario, workload: ModelWorkload) -> int | None:
    """The degree limit D a placement must respect: set in the workload, else the fabric kind's
    (None: any GPU reaches any other)."""
    if workload.model.degree is not None:
        return workload.model.degree
    return behaviour(scenario.fabric.kind).degree(scenario.fabric)


def model_plan(scenario: Scenario) -> Plan:
    """The placer's plan for a `model` workload (InputError for any other kind)."""
    workload = scenario.workload
    if not isinstance(workload, ModelWorkload):
        raise InputError(f"{scenario.name}: placing needs workload.kind model (got {workload.kind})")
    model = workload.model
    if model.profile is not None:
        graph = load_user_profile(model.profile)
    elif model.name in MODELS:
        graph = MODELS[model.name]()
    else:
        raise InputError(f"{scenario.name}: workload.model.name '{model.name}' is not in the zoo "
                         f"({', '.join(sorted(MODELS))}); or give workload.model.profile")
    try:
        return make_plan(graph, device(model.device, model.efficiency), model.mp, model.dp, model.global_batch,
                         placement_degree(scenario, workload), model.tau_us, scenario.fabric.gpu_bandwidth_gbps,
                         plan_settings(model))
    except InputError as error:
        raise InputError(f"{scenario.name}: workload.model: {error}") from None


def model_schedule(scenario: Scenario, plan: Plan, fusion_bytes: float, first_replica_only: bool = False) -> Schedule:
    """The schedule a run of the model workload replays: `plan` with its gradient buckets fused as
    its prediction chose (testbed.oracle.iteration.predict_plan_fused); `first_replica_only`: its
    first MP group's GPUs alone (placer.emit.plan_schedule)."""
    return plan_schedule(plan, scenario.name, scenario.workload.iterations, fusion_bytes, first_replica_only)

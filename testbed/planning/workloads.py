"""A scenario's workload as a Schedule: a collective directly, a placed model through the placer,
a trace from its file, BytePS and PS through their own builder."""

from __future__ import annotations

from testbed.core.chakra import load_chakra
from testbed.core.trace import load_trace
from testbed.fabrics.all_kinds import KINDS, behaviour
from testbed.fabrics.ina.node_links import ina_window
from testbed.fabrics.ina.section import InaFabric
from testbed.model.errors import InputError
from testbed.model.scenario import Scenario
from testbed.model.schedule import GpuSchedule, Schedule, Step
from testbed.oracle.iteration import dp_fusion_bytes
from testbed.placer.emit import plan_schedule
from testbed.placer.plan import Plan, make_plan
from testbed.placer.profiles import device, load_user_profile
from testbed.placer.settings import plan_settings
from testbed.placer.zoo import MODELS
from testbed.planning.byteps_schedule import byteps_schedule
from testbed.planning.jobs import combined_schedule
from testbed.shared import collective_plans as plans
from testbed.shared.collective_plans import SUPPORTED_COLLECTIVES, collective_traffic


def collective_schedule(scenario: Scenario) -> Schedule:
    """Schedule of a `collective` workload: every GPU runs the same collective once per iteration."""
    workload = scenario.workload
    if workload.kind == "collective" and workload.algorithm in plans.SERVICE_ALGORITHMS:
        return byteps_schedule(scenario)
    if workload.kind != "collective":
        raise InputError(
            f"{scenario.name}: workload.kind {workload.kind} is not supported yet; use kind collective"
        )
    key = (workload.collective, workload.algorithm)
    if key not in SUPPORTED_COLLECTIVES:
        supported = ", ".join(f"{c}/{a}" for c, a in sorted(SUPPORTED_COLLECTIVES))
        raise InputError(
            f"{scenario.name}: workload collective {key[0]} with algorithm {key[1]} is not supported yet; "
            f"supported: {supported}"
        )
    node = KINDS[scenario.fabric.kind].aggregation_node
    if workload.algorithm == "ina" and not node:
        raise InputError(f"{scenario.name}: algorithm ina needs an aggregation node: set fabric.kind to ina")
    hosts = scenario.fabric.hosts
    assert workload.bytes is not None and workload.collective is not None  # the scenario's validation
    # An ina fabric may carry several jobs of workers_per_job GPUs each, all running at once.
    fabric = scenario.fabric
    per_job = (fabric.workers_per_job or hosts) if isinstance(fabric, InaFabric) else hosts
    if isinstance(fabric, InaFabric) and workload.algorithm == "ina":
        try:
            ina_window(fabric, per_job)  # the node's pool must hold every job's window
        except InputError as error:
            raise InputError(f"{scenario.name}: {error}") from None
    groups = [tuple(range(start, start + per_job)) for start in range(0, hosts, per_job)]
    gpus = tuple(
        GpuSchedule(
            rank=rank,
            steps=(
                Step(
                    id=workload.collective,
                    kind="collective",
                    op=workload.collective,
                    algorithm=workload.algorithm,
                    group=groups[rank // per_job],
                    bytes=workload.bytes,
                ),
            ),
        )
        for rank in range(hosts)
    )
    block = collective_traffic(workload.collective, workload.algorithm, per_job, workload.bytes)
    matrix = [[0] * hosts for _ in range(hosts)]
    for group in groups:
        for i, src in enumerate(group):
            for j, dst in enumerate(group):
                matrix[src][dst] = block[i][j]
    return Schedule(
        name=scenario.name,
        hosts=hosts,
        iterations=workload.iterations,
        gpus=gpus,
        traffic_matrix_bytes=tuple(tuple(row) for row in matrix),
    )


def placement_degree(scenario: Scenario) -> int | None:
    """The degree limit D a placement must respect: set in the workload, else the fabric kind's
    (None: any GPU reaches any other)."""
    model = scenario.workload.model
    if model is not None and model.degree is not None:
        return model.degree
    return behaviour(scenario.fabric.kind).degree(scenario.fabric)


def model_plan(scenario: Scenario) -> Plan:
    """The placer's plan for a `model` workload."""
    model = scenario.workload.model
    assert model is not None
    if model.profile is not None:
        graph = load_user_profile(model.profile)
    elif model.name in MODELS:
        graph = MODELS[model.name]()
    else:
        raise InputError(f"{scenario.name}: workload.model.name '{model.name}' is not in the zoo "
                         f"({', '.join(sorted(MODELS))}); or give workload.model.profile")
    try:
        return make_plan(graph, device(model.device, model.efficiency), model.mp, model.dp, model.global_batch,
                         placement_degree(scenario), model.tau_us, scenario.fabric.gpu_bandwidth_gbps,
                         plan_settings(model))
    except InputError as error:
        raise InputError(f"{scenario.name}: workload.model: {error}") from None


def schedule_for(scenario: Scenario) -> Schedule:
    if scenario.workload.kind == "jobs":
        return combined_schedule(scenario, schedule_for)
    if scenario.workload.kind == "trace":
        assert scenario.workload.trace is not None
        return load_trace(scenario.workload.trace, scenario.fabric.hosts, scenario.workload.iterations)
    if scenario.workload.kind == "chakra":
        assert scenario.workload.path is not None
        return load_chakra(scenario.workload.path, scenario.fabric.hosts, scenario.workload.iterations,
                           scenario.workload.process_groups, scenario.name, scenario.workload.comm_groups)
    if scenario.workload.kind == "model":
        plan = model_plan(scenario)
        return model_schedule(scenario, plan, dp_fusion_bytes(plan, scenario.fabric))
    return collective_schedule(scenario)


def model_schedule(scenario: Scenario, plan: Plan, fusion_bytes: float) -> Schedule:
    """The schedule a run of the model workload replays: `plan` with its gradient buckets fused as
    its prediction chose (testbed.oracle.iteration.predict_plan_fused)."""
    return plan_schedule(plan, scenario.name, scenario.workload.iterations, fusion_bytes)

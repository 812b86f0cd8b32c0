"""The `llm` workload kind: a large model's Megatron-style schedule, checked against the device's
memory and predicted by simulating it step by step."""

from __future__ import annotations

from dataclasses import replace

from testbed.core.calibration import Calibration
from testbed.model.errors import InputError
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.oracle.replicas import Replicas, simulate_one_replica, stands_for_all
from testbed.oracle.schedule_sim import Simulated
from testbed.workloads.base import WorkloadKind
from testbed.workloads.llm.estimate import CLOSED_FORM, estimate, traffic_formula
from testbed.workloads.llm.ina import check_ina
from testbed.workloads.llm.memory import check_memory
from testbed.workloads.llm.schedule import layout_of, llm_schedule
from testbed.workloads.llm.section import LlmWorkload
from testbed.workloads.predicted import Predicted
from testbed.workloads.sizing import Prepared, size_schedule
from testbed.workloads.stepwise import STEPWISE, retuned, simulated
from testbed.workloads.traffic import traffic_bytes

# Iterations of up to this many steps over all GPUs are simulated step by step (a few seconds
# here). Larger ones (hundreds of GPUs and micro-batches) are simulated as one data-parallel
# replica standing for all where the fabric treats replicas alike and the replica has no more
# steps than this, else predicted in closed form.
SIMULATED_STEPS = 400_000


def step_count(workload: LlmWorkload, hosts: int) -> int:
    """About how many steps the iteration's schedule has: per layer and pass, a compute or two and,
    with tensor parallelism, their collectives; per MoE layer a send and a receive to each other
    GPU of its expert-parallel group in each of its four all-to-alls."""
    par, arch = workload.parallel, workload.model.architecture()
    per_layer = 12 if par.tp > 1 else 2
    moe = sum(arch.is_moe(layer) for layer in range(arch.layers)) // par.pp
    return hosts * par.micro_batches() * ((arch.layers // par.pp) * per_layer + moe * 8 * (par.ep - 1))


def replicas_of(workload: LlmWorkload, hosts: int) -> Replicas:
    """Where each GPU sits among the data-parallel replicas: (its dp index, its (tp, pp) place)."""
    layout = layout_of(workload)
    placement = []
    for rank in range(hosts):
        t, d, p = layout.coordinates(rank)
        placement.append((d, t + p * layout.tp))
    return Replicas(layout.dp, tuple(placement))


class LlmKind(WorkloadKind[LlmWorkload]):
    section = LlmWorkload

    def schedule(self, scenario: Scenario, workload: LlmWorkload) -> Schedule:
        check_ina(scenario, workload)
        check_memory(workload)
        steps = step_count(workload, scenario.fabric.hosts)
        if steps > SIMULATED_STEPS:
            raise InputError(f"{scenario.name}: the iteration has about {steps:,} steps, more than a run can "
                             f"replay ({SIMULATED_STEPS:,}); `testbed predict` answers without it")
        return llm_schedule(workload, scenario.fabric.hosts, scenario.name)

    def predict(self, scenario: Scenario, workload: LlmWorkload) -> Predicted:
        check_ina(scenario, workload)
        memory = check_memory(workload)
        hosts = scenario.fabric.hosts
        if step_count(workload, hosts) > SIMULATED_STEPS:
            empty = Schedule(scenario.name, hosts, workload.iterations, ())
            alone = self._one_replica(scenario, workload)
            if alone is not None:
                return Predicted(scenario, empty, alone.prediction, STEPWISE, gpu_end_s=alone.gpu_end_s,
                                 traffic_bytes=traffic_formula(workload), gpu_memory=memory)
            closed = estimate(workload, scenario.fabric)
            why = (f"; not simulated: over {SIMULATED_STEPS:,} steps only one data-parallel replica is, for all, "
                   f"where the fabric treats replicas alike (elect-flat, elect-cluster), no expert-parallel "
                   f"all-to-all crosses them and the replica has at most {SIMULATED_STEPS:,} steps")
            return Predicted(scenario, empty, replace(closed, formula=closed.formula + why), CLOSED_FORM,
                             traffic_bytes=traffic_formula(workload), gpu_memory=memory)
        schedule = llm_schedule(workload, hosts, scenario.name)
        found = simulated(scenario, schedule, retuned(scenario, schedule, replicas_of(workload, hosts)))
        return replace(found, traffic_bytes=traffic_bytes(schedule), gpu_memory=memory)

    @staticmethod
    def _one_replica(scenario: Scenario, workload: LlmWorkload) -> Simulated | None:
        """One data-parallel replica's schedule simulated for all, where the fabric treats them
        alike, no expert-parallel all-to-all crosses them and one replica's steps are few enough."""
        par, hosts = workload.parallel, scenario.fabric.hosts
        replicas = replicas_of(workload, hosts)
        if par.ep > 1 or step_count(workload, hosts // par.dp) > SIMULATED_STEPS \
                or not stands_for_all(scenario.fabric, replicas):
            return None
        return simulate_one_replica(llm_schedule(workload, hosts, scenario.name, first_replica_only=True),
                                    scenario.fabric, replicas)

    def size(self, predicted: Predicted, workload: LlmWorkload, calibration: Calibration) -> Prepared:
        if not predicted.schedule.gpus:
            raise InputError(f"{predicted.scenario.name}: its schedule is too large to replay (over "
                             f"{SIMULATED_STEPS:,} steps); a run needs fewer GPUs or micro-batches")
        return size_schedule(predicted, calibration)


KIND = LlmKind()

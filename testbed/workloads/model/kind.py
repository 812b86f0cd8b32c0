"""The `model` workload kind: SiP-ML's placement as a schedule, predicted by simulating what runs."""

from __future__ import annotations

from testbed.core.calibration import Calibration
from testbed.model.errors import InputError
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.network.collectives import Prediction
from testbed.oracle.iteration import dp_fusion_bytes, predict_plan_fused
from testbed.oracle.replicas import Replicas
from testbed.workloads.base import WorkloadKind
from testbed.workloads.model.plan import model_plan, model_schedule
from testbed.workloads.model.section import ModelWorkload
from testbed.workloads.predicted import Predicted
from testbed.workloads.sizing import Prepared, size_schedule
from testbed.workloads.stepwise import retuned, simulated

# Placed models up to this many GPUs (what a run can emulate) are predicted by simulating their
# schedule step by step, re-planning where the fabric does; beyond, by the placer's estimate.
SIMULATED_MODEL_HOSTS = 128
PLACER_ESTIMATE = "the placer's closed-form estimate (one MP group and its DP ring)"


class ModelKind(WorkloadKind[ModelWorkload]):
    section = ModelWorkload

    def schedule(self, scenario: Scenario, workload: ModelWorkload) -> Schedule:
        plan = model_plan(scenario)
        return model_schedule(scenario, plan, dp_fusion_bytes(plan, scenario.fabric))

    def predict(self, scenario: Scenario, workload: ModelWorkload) -> Predicted:
        plan = model_plan(scenario)
        estimate, fusion_bytes = predict_plan_fused(plan, scenario.fabric)
        if scenario.fabric.hosts > SIMULATED_MODEL_HOSTS:
            # No schedule is built for a figure that does not use it (seconds at 1,024 GPUs).
            empty = Schedule(scenario.name, scenario.fabric.hosts, workload.iterations, ())
            return Predicted(scenario, empty, estimate, PLACER_ESTIMATE)
        schedule = model_schedule(scenario, plan, fusion_bytes)
        retuning = retuned(scenario, schedule, Replicas.blocks(plan.gpus, plan.l))  # DP groups run the same steps
        found = retuning.prediction
        # The placer searches with its closed-form estimate (one MP group and its DP ring, fast
        # enough for thousands of candidates); the prediction is the simulation of what runs.
        said = Prediction(found.iteration_time_s, found.breakdown,
                          f"{found.formula}; the placer's estimate {estimate.iteration_time_s * 1e3:.3f} ms "
                          f"({estimate.formula})")
        return simulated(scenario, schedule, retuning, prediction=said)

    def size(self, predicted: Predicted, workload: ModelWorkload, calibration: Calibration) -> Prepared:
        if not predicted.schedule.gpus:
            raise InputError(f"{predicted.scenario.name}: predicted by {PLACER_ESTIMATE}, as every placed model "
                             f"over {SIMULATED_MODEL_HOSTS} GPUs is; a run needs at most {SIMULATED_MODEL_HOSTS} GPUs")
        return size_schedule(predicted, calibration, collective_messages=False)


KIND = ModelKind()

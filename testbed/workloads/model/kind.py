"""The `model` workload kind: SiP-ML's placement as a schedule, predicted by simulating what runs."""

from __future__ import annotations

from testbed.core.calibration import Calibration
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.network.collectives import Prediction
from testbed.oracle.iteration import dp_fusion_bytes, predict_plan_fused
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
        schedule = model_schedule(scenario, plan, fusion_bytes)
        if scenario.fabric.hosts > SIMULATED_MODEL_HOSTS:
            return Predicted(scenario, schedule, estimate, PLACER_ESTIMATE)
        retuning = retuned(scenario, schedule)
        found = retuning.prediction
        # The placer searches with its closed-form estimate (one MP group and its DP ring, fast
        # enough for thousands of candidates); the prediction is the simulation of what runs.
        said = Prediction(found.iteration_time_s, found.breakdown,
                          f"{found.formula}; the placer's estimate {estimate.iteration_time_s * 1e3:.3f} ms "
                          f"({estimate.formula})")
        return simulated(scenario, schedule, retuning, prediction=said)

    def size(self, predicted: Predicted, workload: ModelWorkload, calibration: Calibration) -> Prepared:
        return size_schedule(predicted, calibration, collective_messages=False)


KIND = ModelKind()

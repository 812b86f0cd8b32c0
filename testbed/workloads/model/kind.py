"""The `model` workload kind: SiP-ML's placement as a schedule, predicted by simulating what runs."""

from __future__ import annotations

from dataclasses import replace

from testbed.core.calibration import Calibration
from testbed.model.errors import InputError
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.network.collectives import Prediction
from testbed.oracle.iteration import dp_fusion_bytes, predict_plan_fused
from testbed.oracle.replicas import Replicas, simulate_one_replica, stands_for_all
from testbed.workloads.base import WorkloadKind
from testbed.workloads.model.plan import model_plan, model_schedule
from testbed.workloads.model.section import ModelWorkload
from testbed.workloads.predicted import Predicted
from testbed.workloads.sizing import Prepared, size_schedule
from testbed.workloads.stepwise import STEPWISE, retuned, simulated

# Placed models up to this many GPUs (what a run can emulate) are predicted by simulating their
# whole schedule, re-planning where the fabric does. Beyond, where the fabric treats the data-
# parallel replicas alike, one replica's schedule is built and simulated for all (the same figure);
# elsewhere the placer's estimate answers, and says so.
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
        replicas = Replicas.blocks(plan.gpus, plan.l)  # DP groups run the same steps
        if scenario.fabric.hosts > SIMULATED_MODEL_HOSTS:
            # No run at this scale: no whole schedule is built (seconds at 1,024 GPUs).
            empty = Schedule(scenario.name, scenario.fabric.hosts, workload.iterations, ())
            alone = None
            if stands_for_all(scenario.fabric, replicas):  # else the replica is not built at all
                first = model_schedule(scenario, plan, fusion_bytes, first_replica_only=True)
                alone = simulate_one_replica(first, scenario.fabric, replicas)
            if alone is None:
                why = (f"; not simulated: over {SIMULATED_MODEL_HOSTS} GPUs only a fabric that treats the "
                       f"data-parallel replicas alike is (one replica for all), and {scenario.fabric.kind} "
                       f"does not")
                return Predicted(scenario, empty, replace(estimate, formula=estimate.formula + why), PLACER_ESTIMATE)
            return Predicted(scenario, empty, _beside_estimate(alone.prediction, estimate), STEPWISE,
                             gpu_end_s=alone.gpu_end_s)
        schedule = model_schedule(scenario, plan, fusion_bytes)
        retuning = retuned(scenario, schedule, replicas)
        return simulated(scenario, schedule, retuning, prediction=_beside_estimate(retuning.prediction, estimate))

    def size(self, predicted: Predicted, workload: ModelWorkload, calibration: Calibration) -> Prepared:
        if not predicted.schedule.gpus:
            raise InputError(f"{predicted.scenario.name}: a run of a placed model emulates at most "
                             f"{SIMULATED_MODEL_HOSTS} GPUs (fabric.hosts is {predicted.scenario.fabric.hosts}); "
                             f"`testbed predict` answers at this scale")
        return size_schedule(predicted, calibration, collective_messages=False)


def _beside_estimate(found: Prediction, estimate: Prediction) -> Prediction:
    """The simulation's figure, its formula naming the placer's estimate beside it: the placer
    searches with that estimate (fast enough for thousands of candidates); the prediction is the
    simulation of what runs."""
    return Prediction(found.iteration_time_s, found.breakdown,
                      f"{found.formula}; the placer's estimate {estimate.iteration_time_s * 1e3:.3f} ms "
                      f"({estimate.formula})")


KIND = ModelKind()

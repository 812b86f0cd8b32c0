"""The `jobs` workload kind: several jobs on one fabric, each job's schedule made by its own kind,
laid onto its GPUs and simulated together; each job's time together and alone."""

from __future__ import annotations

from collections.abc import Callable

from testbed.core.calibration import Calibration
from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.network.collectives import Prediction
from testbed.workloads.base import WorkloadKind
from testbed.workloads.jobs.combine import combined_schedule, job_times
from testbed.workloads.jobs.section import JobsWorkload
from testbed.workloads.predicted import JobPrediction, Predicted
from testbed.workloads.sizing import Prepared, size_schedule
from testbed.workloads.stepwise import retuned, simulated

SAID_JOBS = 8  # jobs the formula names; a line of 512 jobs' times says nothing


class JobsKind(WorkloadKind[JobsWorkload]):
    section = JobsWorkload

    def __init__(self, schedule_of: Callable[[Scenario], Schedule]) -> None:
        self.schedule_of = schedule_of  # one job's schedule, by its own workload's kind

    def schedule(self, scenario: Scenario, workload: JobsWorkload) -> Schedule:
        return combined_schedule(scenario, self.schedule_of)

    def predict(self, scenario: Scenario, workload: JobsWorkload) -> Predicted:
        """Every job's iteration starts at once and the round ends with the slowest; each job is also
        simulated alone on the same fabric with the other jobs' GPUs idle."""
        schedule = self.schedule(scenario, workload)
        together = retuned(scenario, schedule)
        times = job_times(scenario, together.gpu_end_s)
        jobs = []
        for job, gpus in scenario.job_gpus():
            alone = retuned(scenario, combined_schedule(scenario, self.schedule_of, only=job.name))
            jobs.append(JobPrediction(job.name, tuple(gpus), times[job.name],
                                      job_times(scenario, alone.gpu_end_s)[job.name]))
        said = ", ".join(f"{j.name} {j.together_s * 1e3:.3f} ms (alone {j.alone_s * 1e3:.3f})"
                         for j in jobs[:SAID_JOBS])
        if len(jobs) > SAID_JOBS:  # every job is in the table and in predict --json
            said += f" and {len(jobs) - SAID_JOBS} more"
        found = together.prediction
        return simulated(scenario, schedule, together, tuple(jobs),
                         Prediction(found.iteration_time_s, found.breakdown, f"{found.formula}; jobs together: {said}"))

    def size(self, predicted: Predicted, workload: JobsWorkload, calibration: Calibration) -> Prepared:
        return size_schedule(predicted, calibration)

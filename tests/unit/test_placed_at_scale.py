"""A placed model beyond what the step-by-step simulation covers (SIMULATED_MODEL_HOSTS) is
predicted by the placer's estimate, says so, builds no schedule it would not use, and a run of it
is refused with one sentence rather than sized from nothing."""

from __future__ import annotations

import pytest

from testbed.model.errors import InputError
from testbed.planning.plan import plan, prepare
from testbed.planning.scenario_file import parse_scenario
from testbed.workloads.model.kind import PLACER_ESTIMATE, SIMULATED_MODEL_HOSTS


def scenario(hosts: int):
    fabric = {"kind": "elect-flat", "hosts": hosts, "gpu_bandwidth_gbps": 1000, "latency_us": 1}
    return parse_scenario({"name": "placed-wide", "seed": 1, "fabric": fabric,
                           "workload": {"kind": "model", "model": {"name": "transformer", "mp": 8, "dp": hosts // 8,
                                                                   "global_batch": 2 * hosts, "tau_us": 2000}}},
                          "test")


def test_beyond_the_simulation_the_estimate_answers_without_a_schedule():
    found = plan(scenario(2 * SIMULATED_MODEL_HOSTS))
    assert found.method == PLACER_ESTIMATE
    assert found.schedule.gpus == () and found.schedule.hosts == 2 * SIMULATED_MODEL_HOSTS
    assert found.prediction.iteration_time_s > 0
    with pytest.raises(InputError, match=f"a run needs at most {SIMULATED_MODEL_HOSTS} GPUs"):
        prepare(found.scenario)


def test_within_it_the_schedule_is_simulated():
    found = plan(scenario(64))
    assert found.method == "step-by-step simulation" and len(found.schedule.gpus) == 64

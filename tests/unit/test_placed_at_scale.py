"""A placed model beyond what a run can emulate (SIMULATED_MODEL_HOSTS): on a fabric that treats its
data-parallel replicas alike, one replica's schedule is built and simulated for all, giving the
figure the whole schedule's simulation gives; elsewhere the placer's estimate answers and says
why. Either way no whole schedule is built, and a run is refused with one sentence."""

from __future__ import annotations

import pytest

from testbed.model.errors import InputError
from testbed.planning.plan import plan, prepare
from testbed.planning.scenario_file import parse_scenario
from testbed.workloads.model import kind
from testbed.workloads.model.kind import PLACER_ESTIMATE, SIMULATED_MODEL_HOSTS
from testbed.workloads.stepwise import STEPWISE


def scenario(hosts: int, fabric_kind: str = "elect-flat", **fabric_fields: object):
    fabric = {"kind": fabric_kind, "hosts": hosts, "gpu_bandwidth_gbps": 1000, "latency_us": 1, **fabric_fields}
    return parse_scenario({"name": "placed-wide", "seed": 1, "fabric": fabric,
                           "workload": {"kind": "model", "model": {"name": "transformer", "mp": 8, "dp": hosts // 8,
                                                                   "global_batch": 2 * hosts, "tau_us": 2000}}},
                          "test")


def test_beyond_a_run_one_replica_is_simulated_for_all_without_a_schedule():
    found = plan(scenario(2 * SIMULATED_MODEL_HOSTS))
    assert found.method == STEPWISE
    assert "one of 32 data-parallel replicas simulated" in found.prediction.formula
    assert found.schedule.gpus == () and found.schedule.hosts == 2 * SIMULATED_MODEL_HOSTS
    assert len(found.gpu_end_s) == 2 * SIMULATED_MODEL_HOSTS
    with pytest.raises(InputError, match=f"emulates at most {SIMULATED_MODEL_HOSTS} GPUs"):
        prepare(found.scenario)


@pytest.mark.parametrize("fabric", [{"fabric_kind": "elect-flat"},
                                    {"fabric_kind": "elect-cluster", "gpus_per_server": 8,
                                     "server_uplink_gbps": 2000}])
def test_one_replica_gives_the_whole_schedules_figure(monkeypatch, fabric):
    whole = plan(scenario(32, **fabric))
    assert len(whole.schedule.gpus) == 32
    monkeypatch.setattr(kind, "SIMULATED_MODEL_HOSTS", 16)
    alone = plan(scenario(32, **fabric))
    assert alone.schedule.gpus == () and alone.method == STEPWISE
    assert alone.prediction.iteration_time_s == whole.prediction.iteration_time_s
    assert alone.gpu_end_s == whole.gpu_end_s


def test_a_fabric_that_plans_links_gets_the_estimate_and_says_why():
    found = plan(scenario(2 * SIMULATED_MODEL_HOSTS, "sip-ocs", ocs_switches=8))
    assert found.method == PLACER_ESTIMATE
    assert "not simulated" in found.prediction.formula and "sip-ocs does not" in found.prediction.formula
    assert found.schedule.gpus == ()


def test_within_a_run_the_schedule_is_simulated():
    found = plan(scenario(64))
    assert found.method == STEPWISE and len(found.schedule.gpus) == 64

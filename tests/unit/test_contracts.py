"""The files that cross a process boundary: what a writer builds round-trips, a reader refuses a
file of another version or with a field missing in one sentence naming the file and the field,
and every fabric kind's topology fits the contract."""

from __future__ import annotations

import json

import pytest

from testbed.fabrics.topology import build_topology
from testbed.model.contracts import AgentConfig, ContractError, ControllerReady, InaAgentSettings, Results, Topology
from testbed.planning.scenario_file import load_scenario

from ..conftest import ROOT


def agent_config(**changes) -> AgentConfig:
    fields = dict(rank_addresses=["10.0.0.1", "10.0.0.2"], port=5001, dilation=400.0, byte_scale=0.5,
                  latency_s=5e-6, seed=1, warmup_iterations=1, epoch_monotonic_s=12.5,
                  schedule="/run/schedule.json", out_dir="/run/hosts")
    return AgentConfig(**{**fields, **changes})


def test_an_agent_config_round_trips_with_its_version():
    config = agent_config(ina=InaAgentSettings(node="10.0.0.9", window=64, rto_s=0.01, min_rto_s=0.002))
    text = config.dumps()
    assert json.loads(text)["version"] == 1
    assert AgentConfig.loads(text) == config


def test_a_reader_refuses_another_version_and_names_the_file_and_field():
    text = json.dumps({**json.loads(agent_config().dumps()), "version": 2})
    with pytest.raises(ContractError, match=r"^run/agent_config.json: version: .*version 1"):
        AgentConfig.loads(text, where="run/agent_config.json")
    missing = json.loads(agent_config().dumps())
    del missing["dilation"]
    with pytest.raises(ContractError, match="dilation: Field required"):
        AgentConfig.loads(json.dumps(missing))


def test_a_writer_refuses_what_a_reader_could_not_use():
    with pytest.raises(ValueError):
        agent_config(dilation=0.0)
    with pytest.raises(ValueError):
        agent_config(unknown_field=1)  # a misspelt field is an error, not ignored


@pytest.mark.parametrize("name", ["quickstart", "cluster-allreduce", "byteps", "ocs-allreduce", "ring-allreduce",
                                  "ina-allreduce"])
def test_every_fabric_kinds_topology_fits_the_contract(name):
    fabric = load_scenario(ROOT / "scenarios" / f"{name}.yaml").fabric
    topology = build_topology(fabric, "ab12", 40e6, "user")
    assert Topology.loads(topology.dumps()) == topology


def test_controller_ready_and_results_keep_what_readers_look_up():
    ready = ControllerReady.loads(ControllerReady(switches=[1, 2], time=1.0, unreachable=[(0, 3)]).dumps())
    assert ready.unreachable == [(0, 3)] and ready.api is None
    result = {"name": "x", "status": "ok", "error": None, "iterations_completed": 1, "iterations_planned": 1,
              "iteration_times_s": [1.0], "iteration_tcp_retransmits": [0], "iteration_tcp_timeouts": [0],
              "iteration_stalls": [0], "iteration_steal_frac": [None], "predicted_iteration_time_s": 1.0,
              "emulated_over_predicted": [1.0], "dilation": 10.0, "byte_scale": 1.0, "host_rate_bps": 1e8,
              "breakdown": {"compute_s": 0.1, "communication_s": None}, "reconfigurations": 0,
              "predicted_breakdown": {"compute_s": 0.1}, "sums_correct": True, "sum_problems": [],
              "fidelity": {"ok": True}, "notes": [], "timings_s": {}}
    written = json.loads(Results.model_validate(result).dumps())
    assert written["error"] is None and written["notes"] == [] and written["version"] == 1
    assert "jobs" not in written and "ina" not in written  # only where the run has them
    with pytest.raises(ValueError):
        Results.model_validate({**result, "status": "done"})
    with pytest.raises(ValueError, match="extra"):  # a key no reader knows is a writer's mistake
        Results.model_validate({**result, "iteration_time_s": [1.0]})

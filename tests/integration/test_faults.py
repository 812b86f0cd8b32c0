"""Faults injected into real runs (scenario `faults:`): loss and a dead link are recovered by TCP's
retransmission; a killed agent or a restarted aggregation node stops the run within a bounded
time with an error naming the fault; a restarted controller re-installs its plan while the
switches, fail-secure, keep forwarding only what the plan allows. Every run cleans up."""

from __future__ import annotations

import time

import pytest

from bench.probes import optical_fabric, probe
from testbed.emulation.run import Runner
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario, make_fabric

from ..conftest import ROOT

pytestmark = pytest.mark.root

# 4 GPUs, 4 measured iterations of about 12 ms after 2 warm-ups: faults at 40 ms hit the measured ones.
SMALL = {"fabric.hosts": 4, "workload.iterations": 4}


def run(tmp_path, faults, name="quickstart.yaml", **overrides):
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / name), {**SMALL, **overrides, "faults": faults})
    began = time.monotonic()
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    return result, time.monotonic() - began


@pytest.mark.parametrize("fault", [
    {"kind": "link_loss", "at_ms": 30, "host": 1, "loss_frac": 0.05},
    {"kind": "link_down", "at_ms": 40, "host": 2, "duration_ms": 10},
])
def test_link_faults_are_recovered_by_retransmission(tmp_path, machine_state, fault):
    result, _ = run(tmp_path, [fault])
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"] and len(result["iteration_times_s"]) == 4
    assert [f["phase"] for f in result["faults"]] == (["start", "end"] if "duration_ms" in fault else ["start"])
    if fault["kind"] == "link_down":  # the iteration that lost its link for 10 ms took at least that long
        assert max(result["iteration_times_s"]) >= 0.010


def test_killed_agent_stops_the_run_and_names_the_fault(tmp_path, machine_state):
    result, wall_s = run(tmp_path, [{"kind": "agent_kill", "at_ms": 40, "host": 1}])
    assert result["status"] == "failed"
    assert result["error"].startswith("after fault agent_kill (GPU 1's agent killed) at 40 ms"), result["error"]
    assert wall_s < 60
    assert (tmp_path / "run" / "results.json").exists() and (tmp_path / "run" / "hosts" / "h0.log").exists()


def test_a_link_that_stays_down_stalls_the_run_and_the_watchdog_names_who_waits(tmp_path, machine_state):
    # GPU 2's link goes down for good during the measured iterations: its ring neighbours wait on it.
    result, wall_s = run(tmp_path, [{"kind": "link_down", "at_ms": 40, "host": 2}])
    assert result["status"] == "failed"
    error = result["error"]
    assert error.startswith("after fault link_down"), error
    assert "no rank finished a round for" in error and " waits in " in error, error
    # In a ring all-reduce GPU 3 receives from GPU 2 and GPU 2 from GPU 1: one of them is named.
    assert "to receive from rank 2" in error or "from rank 1" in error, error
    assert (tmp_path / "run" / "hosts" / "h2.waiting.json").exists()
    assert result["iterations_completed"] < 4 and (result["iterations_completed"] == 0 or result["sums_correct"])
    assert wall_s < 90  # the bound (10 s here) and clean-up, not the 60 s + 4× overall limit


def test_restarted_aggregation_node_stops_the_run_within_bounded_time(tmp_path, machine_state):
    # Rounds of about 4 ms from the moment all are connected: 12 ms falls after the two warm-ups.
    result, wall_s = run(tmp_path, [{"kind": "node_restart", "at_ms": 12}], name="ina-allreduce.yaml",
                         **{"workload.bytes": 50_000_000})
    assert result["status"] == "failed"
    assert result["error"].startswith("after fault node_restart"), result["error"]
    assert "aggregation node is not answering" in result["error"] or "no rank finished a round" in result["error"]
    assert wall_s < 90


def test_restarted_controller_reinstalls_its_plan_and_the_run_completes(tmp_path, machine_state):
    result, _ = run(tmp_path, [{"kind": "controller_restart", "at_ms": 30}])
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"] and len(result["iteration_times_s"]) == 4
    log = (tmp_path / "run" / "controller.log").read_text()
    assert result["faults"][0]["kind"] == "controller_restart"
    assert "Traceback" not in log
    # the new controller programmed every switch again after the agents had started
    import json
    import os

    ready = json.loads((tmp_path / "run" / "controller.ready").read_text())
    assert ready["time"] > os.path.getmtime(tmp_path / "run" / "agent_config.json")


RING3 = [[0, 1, 0], [0, 0, 1], [1, 0, 0]]


def test_switches_fail_secure_while_the_controller_is_away(tmp_path, machine_state):
    """With the controller killed, circuits keep carrying traffic and GPUs without a circuit still
    cannot reach each other directly: nothing floods. A restarted controller takes over again."""
    fabric = make_fabric(kind="sip-ocs", hosts=3, gpu_bandwidth_gbps=10, ocs_switches=1)
    with optical_fabric(fabric, 20e6, tmp_path, RING3) as (live, api):
        live.controller.process.kill()
        live.controller.process.wait(timeout=5)
        assert probe(live, 0, 1, tmp_path, duration_s=0.3).arrivals  # a circuit: still forwarded
        h1 = live.fabric.host(0)
        h1.cmd("ip route replace 10.0.0.3/32 dev h1-eth0")  # straight at GPU 2, which has no circuit from 0
        assert probe(live, 0, 2, tmp_path, duration_s=0.3).arrivals == []
        live.controller.process = None
        live.controller.start(port=live.controller.port)
        live.record.add_process(live.controller.process.pid)
        h1.cmd("ip route replace 10.0.0.3/32 via 10.0.0.2 dev h1-eth0 onlink")
        deadline = time.monotonic() + 20
        while not probe(live, 0, 2, tmp_path, duration_s=0.2).arrivals:  # relayed again under the new one
            assert time.monotonic() < deadline


def test_bad_northbound_requests_are_refused_and_change_nothing(tmp_path, machine_state):
    """Malformed JSON, circuits beyond the OCS ports or a GPU's degree, unknown hosts, bad settings:
    400 with a sentence, and the plan is what it was. The API listens on loopback only."""
    import json
    import urllib.error
    import urllib.request

    fabric = make_fabric(kind="sip-ocs", hosts=3, gpu_bandwidth_gbps=10, ocs_switches=1)
    with optical_fabric(fabric, 20e6, tmp_path, RING3) as (live, api):
        assert api.url.startswith("http://127.0.0.1:")
        before = api.plan()
        bodies = [b"{not json", json.dumps({"circuits": [[0, 0, 7]]}).encode(),  # unknown host 7
                  json.dumps({"circuits": [[3, 0, 1]]}).encode(),  # OCS 3 does not exist
                  json.dumps({"circuits": [[0, 0, 1], [0, 0, 2]]}).encode(),  # GPU 0's one port used twice
                  json.dumps({"lightpaths": [[0, 1, 1]]}).encode(), json.dumps([1, 2]).encode()]
        for body in bodies:
            request = urllib.request.Request(api.url + "/circuits", data=body, method="PUT")
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 400 and json.loads(refused.value.read())["error"]
        request = urllib.request.Request(api.url + "/settings", data=b'{"reconfig_us": -5}', method="PATCH")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 400
        assert api.plan()["circuits"] == before["circuits"]

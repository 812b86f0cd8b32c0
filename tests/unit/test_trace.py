"""User-supplied schedules (workload.kind: trace): the example replays, and every kind of bad
trace is refused with a sentence naming the file, GPU and step."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from testbed.model.errors import InputError
from testbed.planning.plan import predict_scenario
from testbed.planning.scenario_file import load_scenario
from testbed.workloads.trace.load import schedule_from_json

from ..conftest import ROOT

EXAMPLE = json.loads((ROOT / "scenarios" / "traces" / "pipeline-4.json").read_text())


def test_example_trace_loads_and_predicts():
    scenario = load_scenario(ROOT / "scenarios" / "trace-pipeline.yaml")
    prediction = predict_scenario(scenario)
    assert 10e-3 < prediction.iteration_time_s < 20e-3
    schedule = schedule_from_json(EXAMPLE, "x.json", 4, 3)
    assert schedule.traffic_matrix_bytes[0][1] == 16_000_000 and schedule.traffic_matrix_bytes[1][0] == 16_000_000


def broken(change):
    data = copy.deepcopy(EXAMPLE)
    change(data)
    return data


@pytest.mark.parametrize("data, hosts, words", [
    ({"format": "other"}, 4, "'format' must be"),
    (EXAMPLE, 8, "has 4 GPUs but fabric.hosts is 8"),
    (broken(lambda d: d["gpus"][0]["steps"][0].update(kind="sleep")), 4, "'kind' must be one of"),
    (broken(lambda d: d["gpus"][0]["steps"][0].update(compute_us=-1)), 4, "at least 0"),
    (broken(lambda d: d["gpus"][0]["steps"][1].update(peer=9)), 4, "'peer' must be another GPU"),
    (broken(lambda d: d["gpus"][0]["steps"][1].update(bytes=5)), 4, "sends 5 bytes but its recv expects"),
    (broken(lambda d: d["gpus"][1]["steps"][0].update(tag="other")), 4, "no matching receive on rank 1"),
    (broken(lambda d: d["gpus"][0]["steps"][1].update(deps=["later"])), 4, "'deps' must list ids of earlier"),
    (broken(lambda d: d["gpus"][0]["steps"][1].update(id="fwd-0")), 4, "unique on this GPU"),
    (broken(lambda d: d["gpus"][0]["steps"].append({"id": "ar", "kind": "collective", "op": "allreduce",
                                                    "algorithm": "byteps", "group": [0, 1], "bytes": 4})), 4,
     "cannot run in a trace"),
    (broken(lambda d: d["gpus"][0]["steps"].append({"id": "ar", "kind": "collective", "op": "allreduce",
                                                    "group": [1, 2], "bytes": 4})), 4, "this one included"),
])
def test_bad_traces_are_refused_with_where_and_how(data, hosts, words):
    with pytest.raises(InputError, match=words):
        schedule_from_json(data, "mine.json", hosts, 1)


def test_cli_reports_a_missing_trace_in_one_sentence_with_exit_2(tmp_path):
    scenario = (ROOT / "scenarios" / "trace-pipeline.yaml").read_text().replace("traces/pipeline-4.json", "none.json")
    (tmp_path / "s.yaml").write_text(scenario)
    done = subprocess.run([sys.executable, "-m", "testbed", "check", str(tmp_path / "s.yaml")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "cannot read" in done.stderr and "Traceback" not in done.stderr


def test_predict_checks_a_given_schedule_like_a_trace(tmp_path):
    bad = broken(lambda d: d["gpus"][0]["steps"][1].update(peer=9))
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    scenario = str(ROOT / "scenarios" / "trace-pipeline.yaml")
    done = subprocess.run([sys.executable, "-m", "testbed", "predict", scenario, "--schedule",
                           str(tmp_path / "bad.json")], capture_output=True, text=True)
    assert done.returncode == 2 and "GPU 0 step" in done.stderr and "Traceback" not in done.stderr
    good = subprocess.run([sys.executable, "-m", "testbed", "predict", scenario, "--json", "--schedule",
                           str(ROOT / "scenarios" / "traces" / "pipeline-4.json")], capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["predicted_iteration_time_s"] == pytest.approx(
        predict_scenario(load_scenario(scenario)).iteration_time_s)


@pytest.mark.parametrize("algorithm", ["ring", "tree", "halving-doubling"])
def test_a_traces_collectives_are_in_its_traffic_matrix_and_predict_on_circuits(algorithm):
    from testbed.oracle.schedule_sim import simulate_schedule
    from testbed.planning.overrides import apply_overrides

    step = {"id": "ar", "kind": "collective", "op": "allreduce", "algorithm": algorithm, "group": [0, 1, 2, 3],
            "bytes": 4_000_000}
    data = {"format": "testbed-schedule/1", "gpus": [{"steps": [dict(step)]} for _ in range(4)]}
    schedule = schedule_from_json(data, "t.json", 4, 1)
    sent = sum(map(sum, schedule.traffic_matrix_bytes))
    assert sent >= 4 * 4_000_000 * 3 / 4  # every GPU sends at least (n-1)/n of its buffer
    scenario = load_scenario(ROOT / "scenarios" / "trace-pipeline.yaml")
    flat = simulate_schedule(schedule, scenario.fabric).iteration_time_s
    ocs = apply_overrides(scenario, {"fabric.kind": "sip-ocs", "fabric.ocs_switches": 2})
    assert simulate_schedule(schedule, ocs.fabric).iteration_time_s >= flat * 0.98

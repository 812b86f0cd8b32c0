"""`testbed check` and `testbed predict` agree: both take the one plan, so an input `predict`
refuses is refused by `check` with the same sentence, and one `check` passes `predict` answers.
Shipped scenarios, random collectives on every fabric, and traces that deadlock or leave a
collective's member out."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbed.fabrics.all_kinds import SECTIONS as FABRICS
from testbed.model.errors import InputError
from testbed.planning.plan import check_scenario, predict_scenario
from testbed.planning.scenario_file import load_scenario, parse_scenario
from testbed.workloads.collective.section import CollectiveWorkload

from ..conftest import ROOT
from .test_fuzz_inputs import BASES, mutate, mutation

FAST_KINDS = ("collective", "trace")  # the test's own filter of what it runs, not the code's

# two-jobs-ocs is the jobs kind's second scenario and takes longest to predict: two-jobs-cluster
# covers the same path.
SHIPPED = [p for p in sorted((ROOT / "scenarios").glob("*.yaml")) if p.stem != "two-jobs-ocs"]


def outcome(call, scenario):
    try:
        return "ok", call(scenario)
    except InputError as error:
        return "refused", str(error)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_scenario_checks_as_it_predicts(path):
    scenario = load_scenario(path)
    report = check_scenario(scenario)
    assert report.prediction == predict_scenario(scenario)


FABRIC_FIELDS = {"ps": {"cpu_servers": 2}, "sip-ocs": {"ocs_switches": 2}, "sip-ring": {"wavelengths": 4},
                 "elect-fattree": {"leaf_hosts": 2}, "elect-cluster": {"gpus_per_server": 2}}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(FABRICS)), st.sampled_from([2, 4, 8]),
       st.sampled_from(list(CollectiveWorkload.model_fields["collective"].annotation.__args__)),
       st.sampled_from(list(CollectiveWorkload.model_fields["algorithm"].annotation.__args__)),
       st.sampled_from([1, 1000, 10**8]))
def test_a_collective_is_refused_by_check_exactly_when_predict_refuses_it(kind, hosts, op, algorithm, size):
    data = {"name": "fuzz", "fabric": {"kind": kind, "hosts": hosts, "gpu_bandwidth_gbps": 100,
                                       **FABRIC_FIELDS.get(kind, {})},
            "workload": {"kind": "collective", "collective": op, "algorithm": algorithm, "bytes": size}}
    try:
        scenario = parse_scenario(data, "fuzz.yaml")
    except InputError:
        return
    checked, predicted = outcome(check_scenario, scenario), outcome(predict_scenario, scenario)
    assert checked[0] == predicted[0], (checked, predicted)
    if checked[0] == "refused":
        assert checked[1] == predicted[1]
    else:
        assert checked[1].prediction == predicted[1]


def _trace(steps_of_rank: list[list[dict]]) -> dict:
    return {"format": "testbed-schedule/1", "name": "t", "hosts": len(steps_of_rank), "iterations": 1,
            "gpus": [{"rank": r, "steps": steps} for r, steps in enumerate(steps_of_rank)]}


def _send(i, peer, tag, deps=()):
    return {"id": i, "kind": "send", "peer": peer, "bytes": 1000, "tag": tag, "deps": list(deps)}


def _recv(i, peer, tag, deps=()):
    return {"id": i, "kind": "recv", "peer": peer, "bytes": 1000, "tag": tag, "deps": list(deps)}


def _allreduce(i, group):
    return {"id": i, "kind": "collective", "op": "allreduce", "algorithm": "ring", "group": group,
            "bytes": 1000000, "deps": []}


HELD_OUT = {
    # each waits for the other's message before sending its own
    "send-recv deadlock": _trace([[_recv("r", 1, "b"), _send("s", 1, "a", ["r"])],
                                  [_recv("r", 0, "a"), _send("s", 0, "b", ["r"])]]),
    # rank 1 never joins the all-reduce ranks 0 and 1 share
    "collective missing on one member": _trace([[_allreduce("ar", [0, 1])], []]),
}


@pytest.mark.parametrize("name", sorted(HELD_OUT))
def test_check_and_predict_refuse_a_broken_trace_with_the_same_sentence(tmp_path, name):
    (tmp_path / "t.json").write_text(json.dumps(HELD_OUT[name]))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({
        "name": "held-out", "fabric": {"kind": "elect-flat", "hosts": 2, "gpu_bandwidth_gbps": 100},
        "workload": {"kind": "trace", "trace": "t.json"}}))
    said = {}
    for command in ("check", "predict"):
        out = subprocess.run([sys.executable, "-m", "testbed", command, str(tmp_path / "s.yaml")],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, (command, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr
        said[command] = out.stderr.strip()
    assert said["check"] == said["predict"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(BASES))), st.lists(mutation, min_size=1, max_size=3))
def test_mutated_scenarios_check_as_they_predict(base, changes):
    """The fuzz corpus of test_fuzz_inputs (shipped scenarios with fields replaced, added or
    removed), where a prediction takes milliseconds: collectives and traces on up to 16 GPUs."""
    try:
        scenario = parse_scenario(mutate(BASES[base], changes), "fuzz.yaml")
    except InputError:
        return
    if scenario.workload.kind not in FAST_KINDS or scenario.fabric.hosts > 16 or scenario.loses_packets():
        return
    checked, predicted = outcome(check_scenario, scenario), outcome(predict_scenario, scenario)
    assert checked[0] == predicted[0], (checked, predicted)
    assert (checked[1] if checked[0] == "refused" else checked[1].prediction) == predicted[1]

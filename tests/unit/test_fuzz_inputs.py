"""Fuzzing of what users hand the tool: every scenario in scenarios/ mutated at random (fields
replaced, added or removed, with values of any JSON type), op profiles, JSON traces, Chakra trace
bytes and damaged run directories. Each either succeeds or raises InputError in one sentence;
nothing else escapes, and no example takes longer than its deadline (a hang fails the test).
Thousands of cases run in CI."""

from __future__ import annotations

import copy
import json
import os
import shutil
from datetime import timedelta

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbed.model.errors import InputError
from testbed.planning.scenario_file import parse_scenario
from testbed.workloads.all_kinds import schedule_for

from ..conftest import ROOT

BASES = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "scenarios").glob("*.yaml"))]
FIELDS = sorted({f"{section}.{key}" for base in BASES for section, body in base.items() if isinstance(body, dict)
                 for key in body} | {"fabric.nonsense", "workload.model.mp", "workload.model.name", "emulation.x"})

values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12) | st.sampled_from(["auto", "ina", "ring", "sip-ocs", "trace", "model", "1e3", ""]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6,
)
mutation = st.tuples(st.sampled_from(FIELDS), st.one_of(values, st.just("<delete>")))


def mutate(base: dict, changes) -> dict:
    data = copy.deepcopy(base)
    for dotted, value in changes:
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        if value == "<delete>":
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return data


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(BASES))), st.lists(mutation, min_size=1, max_size=3))
def test_mutated_scenarios_parse_or_fail_with_one_sentence(base, changes):
    data = mutate(BASES[base], changes)
    try:
        scenario = parse_scenario(data, "fuzz.yaml")
    except InputError as error:
        assert str(error).startswith("fuzz.yaml") and "\n" not in str(error)
        return
    if scenario.workload.kind == "collective" and scenario.fabric.hosts <= 16:
        try:
            schedule_for(scenario)
        except InputError as error:
            assert "\n" not in str(error)


OP_KEYS = ["name", "kind", "compute_us_per_sample", "compute_us_per_batch", "output_bytes", "parameter_bytes",
           "deps", "split", "x"]
op_entries = st.dictionaries(st.sampled_from(OP_KEYS), values, max_size=6)


@settings(max_examples=1000, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["name", "batch", "ops", "extra"]),
                       st.one_of(values, st.lists(op_entries, max_size=4)), max_size=4))
def test_user_op_profiles_load_or_fail_with_one_sentence(tmp_path, data):
    from testbed.placer.profiles import load_user_profile

    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        load_user_profile(path)
    except InputError as error:
        assert str(error).startswith(str(path)) and "\n" not in str(error)


# A case is small: anything slower than this is work the input's size does not explain.
DEADLINE = timedelta(seconds=10)
STEP_KEYS = ["id", "kind", "compute_us", "peer", "bytes", "tag", "deps", "op", "group", "algorithm", "x"]
step_kinds = st.sampled_from(["compute", "send", "recv", "collective", "teleport"])
trace_steps = st.fixed_dictionaries(
    {"id": st.sampled_from(["a", "b", "c", 3]), "kind": step_kinds, "deps": st.just([]) | st.just(["a"])},
    optional={"compute_us": st.floats(0, 100) | values, "peer": st.integers(-1, 3) | values,
              "bytes": st.integers(-1, 10**13) | values, "tag": st.sampled_from(["m", "n"]) | values,
              "op": st.sampled_from(["allreduce", "allgather", "alltoall", "broadcast"]) | values,
              "group": st.lists(st.integers(-1, 3), max_size=3) | values})
gpu_steps = st.fixed_dictionaries({"rank": st.integers(0, 1) | values, "steps": st.lists(trace_steps, max_size=4)})
traces = st.fixed_dictionaries(
    {"format": st.sampled_from(["testbed-schedule/1", "x"]), "hosts": st.integers(1, 3) | values,
     "gpus": st.lists(gpu_steps, min_size=2, max_size=2) | st.lists(gpu_steps, max_size=3)},
    optional={"iterations": values, "execution": st.sampled_from(["dag", "in-order", "x"]), "name": values})


@settings(max_examples=int(os.environ.get("FUZZ_TRACES", 1500)), deadline=DEADLINE,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(traces)
def test_json_traces_predict_or_fail_with_one_sentence(tmp_path, trace):
    from testbed.planning.plan import check_scenario

    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    data = {"name": "t", "fabric": {"kind": "elect-flat", "hosts": 2, "gpu_bandwidth_gbps": 100},
            "workload": {"kind": "trace", "trace": str(path)}}
    try:
        check_scenario(parse_scenario(data, "fuzz.yaml"))
    except InputError as error:
        assert "\n" not in str(error)


CHAKRA = ROOT / "scenarios" / "traces" / "chakra-3d"
RANK_FILE = "tp2-pp2-dp2.3.et"
damage = st.lists(st.tuples(st.sampled_from(["flip", "cut", "insert"]), st.floats(0, 1), st.binary(max_size=8)),
                  min_size=1, max_size=4)


@settings(max_examples=500, deadline=DEADLINE,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(damage)
def test_damaged_chakra_bytes_load_or_fail_with_one_sentence(tmp_path, changes):
    from testbed.workloads.chakra.load import load_chakra

    directory = tmp_path / "trace"
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(CHAKRA, directory)
    data = bytearray((directory / RANK_FILE).read_bytes())
    for how, where, chunk in changes:
        at = int(where * len(data))
        if how == "flip" and data:
            data[min(at, len(data) - 1)] ^= (chunk[0] if chunk else 0xFF) or 1
        elif how == "cut":
            del data[at:]
        else:
            data[at:at] = chunk
    (directory / RANK_FILE).write_bytes(bytes(data))
    try:
        load_chakra(directory, 8, 1)
    except InputError as error:
        assert "\n" not in str(error)


RESULT_KEYS = ["name", "status", "iteration_times_s", "emulated_over_predicted", "predicted_iteration_time_s",
               "sums_correct", "breakdown", "predicted_breakdown", "fidelity", "jobs", "x"]
times = st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 5) | values, max_size=3)


@settings(max_examples=150, deadline=DEADLINE,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(RESULT_KEYS), times | values, max_size=8),
       st.one_of(st.none(), st.binary(max_size=40), st.just(b'{"t_s": 1, "host": 0, "kind": "compute"}\n')))
def test_damaged_run_directories_report_or_fail_with_one_sentence(tmp_path, result, events):
    import testbed
    from testbed.interface.report import report

    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir()
    (run / "results.json").write_text(json.dumps(result))
    if events is not None:
        (run / "events.jsonl").write_bytes(events)
    for read in (lambda: report(run), lambda: testbed.load_run(run)):
        try:
            read()
        except InputError as error:
            assert "\n" not in str(error)

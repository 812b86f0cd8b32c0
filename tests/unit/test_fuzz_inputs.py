"""Fuzzing of what users hand the tool: every scenario in scenarios/ mutated at random (fields
replaced, added or removed, with values of any JSON type). Parsing, and for small collectives the
schedule `testbed check` builds, either succeed or raise InputError naming the file; nothing else
escapes. Thousands of cases run in CI."""

from __future__ import annotations

import copy

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

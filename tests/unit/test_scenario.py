import copy
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.model.errors import InputError
from testbed.planning.overrides import apply_overrides
from testbed.planning.scenario_file import load_scenario, parse_scenario

from ..conftest import ROOT

BASE = {
    "name": "t",
    "fabric": {"kind": "elect-flat", "hosts": 8, "gpu_bandwidth_gbps": 100, "latency_us": 5},
    "workload": {"kind": "collective", "collective": "allreduce", "bytes": 1000000},
}


def with_change(path, value=None, delete=False):
    data = copy.deepcopy(BASE)
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {})
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


def test_quickstart_is_valid():
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    assert scenario.fabric.hosts == 8 and scenario.workload.iterations == 3


@pytest.mark.parametrize("data, words", [
    (with_change(("fabric", "gpu_bandwdth_gbps"), 3),
     ["unknown field", "fabric.gpu_bandwdth_gbps", "gpu_bandwidth_gbps"]),
    (with_change(("fabric", "gpu_bandwidth_gbps"), -100), ["fabric.gpu_bandwidth_gbps", "greater than 0"]),
    (with_change(("fabric", "hosts"), delete=True), ["missing", "fabric.hosts"]),
    (with_change(("fabric", "wavelengths"), 4), ["wavelengths", "sip-ring"]),
    (with_change(("workload", "bytes"), delete=True), ["bytes"]),
    (with_change(("emulation",), {"dilation": "fast"}), ["emulation.dilation", "auto"]),
    (with_change(("emulation",), {"dilation": -2}), ["emulation.dilation"]),
    (with_change(("fabric", "gpu_bandwidth"), 100), ["unknown field", "fabric.gpu_bandwidth"]),
    (with_change(("fabric", "kind"), "fat-tree"), ["fabric.kind"]),
])
def test_bad_scenarios_name_file_and_field(data, words):
    with pytest.raises(InputError) as error:
        parse_scenario(data, "bad.yaml")
    message = str(error.value)
    assert message.startswith("bad.yaml: ")
    assert "\n" not in message
    for word in words:
        assert word in message


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(InputError, match="no such scenario file"):
        load_scenario(tmp_path / "nope.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_scenario(broken)


def test_overrides_are_revalidated():
    scenario = parse_scenario(BASE)
    assert apply_overrides(scenario, {"fabric.hosts": 4}).fabric.hosts == 4
    with pytest.raises(InputError):
        apply_overrides(scenario, {"fabric.hosts": 1})


@pytest.mark.parametrize("content, word", [
    ("name: t\nfabric: {kind: elect-flat, hosts: 8, gpu_bandwdth_gbps: 1}\nworkload: {kind: collective}\n",
     "gpu_bandwdth_gbps"),
    ("name: t\nfabric: {kind: elect-flat, hosts: 8, gpu_bandwidth_gbps: -1}\n"
     "workload: {kind: collective, collective: allreduce, bytes: 10}\n", "gpu_bandwidth_gbps"),
])
def test_cli_bad_input_exits_2_with_one_sentence(tmp_path, content, word):
    path = tmp_path / "scenario.yaml"
    path.write_text(content)
    for command in ("check", "predict", "run"):
        out = subprocess.run([sys.executable, "-m", "testbed", command, str(path)], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 2, (command, out.stderr)
        assert "Traceback" not in out.stderr + out.stdout
        assert str(path) in out.stderr.replace("\n", "") and word in out.stderr.replace("\n", "")


def test_cli_missing_file_exits_2(tmp_path):
    out = subprocess.run([sys.executable, "-m", "testbed", "check", str(tmp_path / "missing.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "missing.yaml" in out.stderr


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["name", "seed", "fabric", "workload", "emulation", "x"]), json_values,
                       max_size=5))
def test_parsing_never_crashes(data):
    try:
        parse_scenario(data, "fuzz.yaml")
    except InputError as error:
        assert str(error).startswith("fuzz.yaml")


def test_resolved_scenario_reloads():
    import yaml

    from testbed.planning.scenario_file import scenario_to_yaml

    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    text = scenario_to_yaml(scenario, {"dilation": 99.5, "byte_scale": 0.1})
    again = parse_scenario(yaml.safe_load(text), "resolved.yaml")
    assert again.emulation.dilation == 99.5 and again.fabric == scenario.fabric


@pytest.mark.parametrize("name", ["ring-allreduce.yaml", "ocs-multishot.yaml"])
def test_resolved_optical_scenarios_keep_their_estimation_period(name):
    import yaml

    from testbed.planning.overrides import apply_overrides
    from testbed.planning.scenario_file import scenario_to_yaml

    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / name), {"fabric.estimate_period_us": 500})
    data = yaml.safe_load(scenario_to_yaml(scenario))
    assert data["fabric"]["estimate_period_us"] == 500
    assert parse_scenario(data, "resolved.yaml").fabric == scenario.fabric


def test_cli_check_refuses_a_combination_no_schedule_can_run(tmp_path):
    path = tmp_path / "scenario.yaml"
    path.write_text("name: t\nfabric: {kind: ps, hosts: 4, cpu_servers: 5, gpu_bandwidth_gbps: 100}\n"
                    "workload: {kind: collective, collective: allreduce, algorithm: byteps, bytes: 1000000}\n")
    for command in ("check", "predict"):
        out = subprocess.run([sys.executable, "-m", "testbed", command, str(path)], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 2, (command, out.stderr)
        assert "Traceback" not in out.stderr + out.stdout and "cpu_servers" not in out.stdout
        assert "at most as many CPU machines" in out.stderr.replace("\n", " ")


ONE_RING = "workload: {kind: collective, collective: allreduce, algorithm: ring, bytes: 5000, iterations: 1}\n"


def test_a_key_given_twice_is_an_error_naming_its_line(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("name: twice\nfabric:\n  kind: elect-flat\n  hosts: 4\n  gpu_bandwidth_gbps: 100\n  hosts: 8\n"
                    + ONE_RING)
    with pytest.raises(InputError, match=r"key 'hosts' appears twice in one mapping \(line 6\)"):
        load_scenario(path)


def test_non_finite_numbers_are_refused(tmp_path):
    path = tmp_path / "inf.yaml"
    path.write_text("name: inf\nfabric: {kind: elect-flat, hosts: 4, gpu_bandwidth_gbps: .inf}\n"
                    + ONE_RING)
    with pytest.raises(InputError, match=r"fabric.gpu_bandwidth_gbps.*finite number"):
        load_scenario(path)


def test_every_problem_is_listed():
    data = {"name": "many", "fabric": {"kind": "elect-flat", "hosts": 4, "gpu_bandwidth_gbps": 100, "bogus": 1},
            "workload": {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "bytes": -5,
                         "iterations": 0}}
    with pytest.raises(InputError) as raised:
        parse_scenario(data, "many.yaml")
    message = str(raised.value)
    assert message.startswith("many.yaml: unknown field 'fabric.bogus'")
    assert "2 more problems: " in message and "workload.bytes" in message and "workload.iterations" in message


@pytest.mark.parametrize("override", [{"workload.bytes": 2**53}, {"fabric.cpu_servers": 10**12}])
def test_sizes_no_machine_could_plan_are_refused(override):
    # A float's overflow made an integer of 2**53 bytes, which the BytePS partition split into
    # chunks until the test run ran out of memory.
    with pytest.raises(InputError, match="less than or equal"):
        apply_overrides(load_scenario(ROOT / "scenarios" / "byteps.yaml"), override)


def _write_model(tmp_path, model: str) -> str:
    path = tmp_path / "m.yaml"
    path.write_text("name: m\nfabric: {kind: elect-flat, hosts: 8, gpu_bandwidth_gbps: 100}\n"
                    f"workload: {{kind: model, model: {{{model}}}, iterations: 2}}\n")
    return str(path)


@pytest.mark.parametrize("model, words", [
    ("name: gpt3, global_batch: 64, mp: 4, dp: 2", "not in the zoo"),
    ("name: resnet50, global_batch: 3, mp: 4, dp: 2", "does not divide into 2 DP groups"),
    ("name: megatron, global_batch: 8, mp: 1, dp: 8", "raise mp"),
    ("name: mine, profile: nothere.yaml, global_batch: 64, mp: 4, dp: 2", "no such profile file"),
])
def test_check_refuses_what_predict_would(tmp_path, model, words):
    done = subprocess.run([sys.executable, "-m", "testbed", "check", _write_model(tmp_path, model)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1  # one sentence on one line
    as_json = subprocess.run([sys.executable, "-m", "testbed", "check", "--json", _write_model(tmp_path, model)],
                             capture_output=True, text=True, timeout=120)
    report = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and not report["ok"] and words in report["error"]


def test_sip_rings_wavelengths_carry_its_bandwidth_or_the_scenario_is_refused(tmp_path):
    """16 wavelengths of 25 Gb/s carry 400 Gb/s, not the 1,600 the field says: predicted with the
    wavelengths and emulated with B, the two disagreed (check only warned). Refused; unset, a
    wavelength carries B / W."""
    path = tmp_path / "r.yaml"
    path.write_text("name: r\nfabric: {kind: sip-ring, hosts: 8, gpu_bandwidth_gbps: 1600, wavelengths: 16, "
                    "wavelength_gbps: 25}\nworkload: {kind: collective, collective: allreduce, bytes: 1000000}\n")
    for command in ("check", "predict"):
        done = subprocess.run([sys.executable, "-m", "testbed", command, str(path)], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        said = done.stdout + done.stderr
        assert "16 × 25 = 400 Gb/s) is not gpu_bandwidth_gbps (1600 Gb/s)" in said and "wavelengths: 64" in said
    derived = parse_scenario({"name": "r", "fabric": {"kind": "sip-ring", "hosts": 8, "gpu_bandwidth_gbps": 1600,
                                                      "wavelengths": 16},
                              "workload": {"kind": "collective", "collective": "allreduce", "bytes": 1000000}}, "r")
    assert derived.fabric.wavelength_rate_gbps == 100.0


def test_search_refuses_fewer_than_two_gpus_instead_of_falling_back(tmp_path):
    path = _write_model(tmp_path, "name: resnet50, global_batch: 64, mp: 4, dp: 2")
    done = subprocess.run([sys.executable, "-m", "testbed", "search", path, "--gpus", "0"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "--gpus 0" in done.stderr, done.stderr


@pytest.mark.parametrize(("change", "words"), [
    ({"fabric.hosts": 2048}, "kind collective predicts at most 1,024 GPUs, not fabric.hosts (2048)"),
    ({"fabric.hosts": 16_385}, "less than or equal to 16384"),
])
def test_only_the_kinds_that_predict_clusters_take_more_than_1024_gpus(change, words):
    with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        apply_overrides(parse_scenario(BASE), change)


def test_jobs_on_more_than_1024_gpus_are_refused():
    data = {"name": "j", "fabric": {"kind": "elect-flat", "hosts": 2048, "gpu_bandwidth_gbps": 100},
            "jobs": [{"name": "a", "gpus": 2, "workload": BASE["workload"]}]}
    with pytest.raises(InputError, match="a fabric shared by jobs predicts at most 1,024 GPUs"):
        parse_scenario(data, "jobs.yaml")

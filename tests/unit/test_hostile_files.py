"""Hostile input gets one sentence and exit 2, never a traceback: markup-like text echoed in an
error, scenario files that are not UTF-8, too large or nested thousands deep, traces that are
devices, nested too deep or hold numbers no step can take, comm-group files that are not UTF-8,
output paths that cannot be written, API counts of nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from testbed.model.errors import InputError
from testbed.planning.scenario_file import MAX_SCENARIO_BYTES, load_scenario
from testbed.workloads.chakra.load import load_comm_groups
from testbed.workloads.trace.load import load_trace

from ..conftest import ROOT

GOOD = "name: x\nfabric: {kind: elect-flat, hosts: 2, gpu_bandwidth_gbps: 100}\n" \
       "workload: {kind: collective, collective: allreduce, bytes: 1000}\n"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "testbed", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


@pytest.mark.parametrize("kind", ["[/red]", "[bold]x", "[link=file:///]y[/link]"])
def test_markup_in_an_echoed_value_is_printed_as_it_is(tmp_path, kind):
    path = tmp_path / "s.yaml"
    path.write_text(GOOD.replace("elect-flat", json.dumps(kind)))
    out = cli("check", str(path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"unknown fabric kind '{kind}'" in out.stderr


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "latin-1"])
def test_a_scenario_that_is_not_utf8_is_refused_in_one_sentence(tmp_path, encoding):
    path = tmp_path / "s.yaml"
    path.write_bytes(GOOD.replace("name: x", "name: x  # café ✓" if encoding != "latin-1" else "name: x  # café")
                     .encode(encoding))
    with pytest.raises(InputError, match="not UTF-8 text.*saved as UTF-8"):
        load_scenario(path)


def test_a_utf8_bom_is_read(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_bytes(GOOD.encode("utf-8-sig"))
    assert load_scenario(path).name == "x"


def test_a_scenario_nested_thousands_deep_is_refused(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: x\nfabric: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n")
    with pytest.raises(InputError, match="nested too deeply"):
        load_scenario(path)


def test_a_file_far_larger_than_any_scenario_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(GOOD + "# " + "x" * MAX_SCENARIO_BYTES + "\n")
    with pytest.raises(InputError, match="more than a scenario"):
        load_scenario(path)


def test_a_trace_that_is_a_device_is_not_read(tmp_path):
    with pytest.raises(InputError, match="not a regular file"):
        load_trace("/dev/zero", 2, 1)


def test_a_trace_nested_thousands_deep_is_refused(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="nested too deeply"):
        load_trace(path, 2, 1)


def test_a_comm_group_file_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "groups.json"
    path.write_bytes('{"1": [0, 1]}'.encode("utf-16"))
    with pytest.raises(InputError, match="not UTF-8"):
        load_comm_groups(path, 2)


def _two_step_trace(compute_us: str, size: str) -> str:
    """Two GPUs: GPU 0 computes, then sends to GPU 1 (numbers as written in the file)."""
    return ('{"format": "testbed-schedule/1", "name": "t", "hosts": 2, "iterations": 1, "gpus": ['
            '{"rank": 0, "steps": [{"id": "c", "kind": "compute", "compute_us": ' + compute_us + '},'
            '{"id": "s", "kind": "send", "peer": 1, "bytes": ' + size + ', "tag": "m", "deps": ["c"]}]},'
            '{"rank": 1, "steps": [{"id": "r", "kind": "recv", "peer": 0, "bytes": ' + size + ', "tag": "m"}]}]}')


@pytest.mark.parametrize(("compute_us", "size", "said"), [
    ("NaN", "1000", "NaN is not a number a file can hold"),  # the simulation never returned
    ("Infinity", "1000", "Infinity is not a number a file can hold"),
    ("1e300", "1000", "'compute_us' must be at most"),
    ("10", "1" + "0" * 400, "'bytes' must be at most"),  # an OverflowError in the oracle
])
def test_a_trace_number_no_step_can_take_is_refused(tmp_path, compute_us, size, said):
    path = tmp_path / "t.json"
    path.write_text(_two_step_trace(compute_us, size))
    with pytest.raises(InputError, match=said):
        load_trace(path, 2, 1)


def test_a_trace_within_the_bounds_loads(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(_two_step_trace("10.5", "1000"))
    assert [s.kind for s in load_trace(path, 2, 1).gpus[0].steps] == ["compute", "send"]


@pytest.mark.parametrize("command", [["place", "scenarios/placer-example.yaml"],
                                     ["export-chakra", "scenarios/quickstart.yaml"]])
def test_out_pointing_at_a_file_is_refused_in_one_sentence(tmp_path, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = cli(*command, "--out", str(blocker))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "a file is there, not a directory" in out.stderr


def test_a_plot_given_a_directory_is_refused_before_any_work(tmp_path):
    out = cli("compare", "scenarios/quickstart.yaml", "--plot", str(tmp_path))
    assert out.returncode == 2 and "a directory; give a file" in out.stderr


def test_a_plot_without_a_suffix_is_written_as_png_and_named_so(tmp_path):
    out = cli("compare", "scenarios/quickstart.yaml", "--plot", str(tmp_path / "bars"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "bars.png").is_file() and f"plot: {tmp_path / 'bars.png'}" in out.stderr


@pytest.mark.parametrize("top", [0, -1, 1.5, True])
def test_the_api_search_refuses_a_count_of_no_choices(top):
    import testbed

    scenario = testbed.load_scenario(ROOT / "scenarios" / "placer-example.yaml")
    with pytest.raises(InputError, match="give how many choices"):
        testbed.search(scenario, top=top)


GOOD_RESULT = {"name": "x", "status": "ok", "iteration_times_s": [0.01], "emulated_over_predicted": [1.0],
               "predicted_iteration_time_s": 0.01, "sums_correct": True, "dilation": 10, "byte_scale": 0.1,
               "breakdown": {"compute_s": 0.004, "communication_s": 0.006},
               "predicted_breakdown": {"compute_s": 0.004, "communication_s": 0.006},
               "fidelity": {"ok": True, "monitors": {}}}


@pytest.mark.parametrize(("results", "events", "said"), [
    ("", None, "a damaged run directory"),  # empty
    (json.dumps(GOOD_RESULT)[:40], None, "a damaged run directory"),  # truncated
    ("[1, 2]", None, "holds a list, not a run's results"),
    (json.dumps({**GOOD_RESULT, "breakdown": [1, 2]}), None, "a damaged run directory"),  # wrong type
    (json.dumps({**GOOD_RESULT, "iteration_times_s": [-1]}), None, "-1 is not an iteration time"),
    (json.dumps({**GOOD_RESULT, "iteration_times_s": [float("nan")]}), None, "nan is not an iteration time"),
    (json.dumps({**GOOD_RESULT, "iteration_times_s": [float("inf")]}), None, "inf is not an iteration time"),
    (json.dumps(GOOD_RESULT), b"\xff\xfe{}\n", "a damaged run directory"),  # events not UTF-8
])
def test_a_damaged_run_directory_is_reported_in_one_sentence(tmp_path, results, events, said):
    from testbed.interface.report import report

    (tmp_path / "results.json").write_text(results)
    if events is not None:
        (tmp_path / "events.jsonl").write_bytes(events)
    with pytest.raises(InputError, match=said):
        report(tmp_path)


@pytest.mark.parametrize("manifest", ["", '{"sets": ', "[]"])
def test_a_damaged_sweep_directory_is_reported_in_one_sentence(tmp_path, manifest):
    from testbed.interface.report import report

    (tmp_path / "sweep.json").write_text(manifest)
    with pytest.raises(InputError, match="a damaged sweep directory"):
        report(tmp_path)


@pytest.mark.parametrize(("field", "value"), [("gpu_bandwidth_gbps", 1e308), ("gpu_bandwidth_gbps", 2e7),
                                              ("latency_us", 1e9)])
def test_a_rate_or_latency_beyond_any_fabric_is_refused(field, value):
    """1e308 Gb/s predicted an iteration of 0.0 s: every transfer rounded to no time at all."""
    from testbed.planning.scenario_file import parse_scenario

    data = {"name": "x", "fabric": {"kind": "elect-flat", "hosts": 2, "gpu_bandwidth_gbps": 100, field: value},
            "workload": {"kind": "collective", "collective": "allreduce", "bytes": 1000}}
    with pytest.raises(InputError, match=f"fabric.{field}': Input should be less than or equal to"):
        parse_scenario(data, "s.yaml")


@pytest.mark.parametrize(("fabric", "field"), [
    ({"kind": "sip-ring", "wavelengths": 10**9}, "wavelengths"),
    ({"kind": "sip-ocs", "ocs_switches": 100_000}, "ocs_switches"),
    ({"kind": "ina", "link_loss_frac": 0.999999}, "link_loss_frac"),
    ({"kind": "ina", "node_drop_frac": 0.9}, "node_drop_frac"),
])
def test_counts_and_losses_that_would_hang_the_planners_are_refused(fabric, field):
    """A billion wavelengths, 100,000 switches and a loss of 0.999999 each ran past a minute."""
    from testbed.planning.scenario_file import parse_scenario

    data = {"name": "x", "fabric": {"hosts": 4, "gpu_bandwidth_gbps": 100, **fabric},
            "workload": {"kind": "collective", "collective": "allreduce", "bytes": 1000}}
    with pytest.raises(InputError, match=f"fabric.{field}': Input should be less than or equal to"):
        parse_scenario(data, "s.yaml")


def _allreduce(size: int) -> dict:
    return {"id": "ar", "kind": "collective", "op": "allreduce", "algorithm": "ring", "group": [0, 1], "bytes": size}


def test_members_of_one_trace_collective_with_different_sizes_are_refused(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"format": "testbed-schedule/1", "gpus": [
        {"rank": 0, "steps": [_allreduce(1000)]}, {"rank": 1, "steps": [_allreduce(2000)]}]}))
    with pytest.raises(InputError, match="GPU 0 runs allreduce .ring. of 1000 bytes, GPU 1 allreduce .ring. of 2000"):
        load_trace(path, 2, 1)


def test_an_empty_trace_is_refused_not_predicted_as_no_time(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"format": "testbed-schedule/1", "gpus": [{"rank": 0, "steps": []},
                                                                          {"rank": 1, "steps": []}]}))
    with pytest.raises(InputError, match="no GPU has a step"):
        load_trace(path, 2, 1)


def test_json_output_is_json_alone_whatever_a_native_library_writes(monkeypatch, capfd):
    """HiGHS writes some MIP lines to file descriptor 1 itself: under --json they go to stderr."""
    import json
    import os

    from testbed.interface import cli

    def predict_that_a_solver_talks_through(args):
        os.write(1, b"HighsMipSolverData::something\n")
        print(json.dumps({"predicted_iteration_time_s": 1.0}))
        return 0

    monkeypatch.setattr(cli, "cmd_predict", predict_that_a_solver_talks_through)
    assert cli.main(["predict", "--json", "any.yaml"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out) == {"predicted_iteration_time_s": 1.0}
    assert "HighsMipSolverData" in err


def test_an_unknown_key_that_looks_like_an_index_is_named_as_typed():
    """A key "a[0]" vanished from the sentence ("unknown field 'fabric'")."""
    from testbed.planning.scenario_file import parse_scenario

    data = {"name": "x", "fabric": {"kind": "elect-flat", "hosts": 2, "gpu_bandwidth_gbps": 100, "a[0]": 1},
            "workload": {"kind": "collective", "collective": "allreduce", "bytes": 1000}}
    with pytest.raises(InputError, match=r"unknown field 'fabric\.a\[0\]'"):
        parse_scenario(data, "s.yaml")


def test_a_degree_that_crowds_the_model_onto_one_gpu_says_so():
    """Megatron at mp 8 with degree 1 said "raise mp" with mp already all 8 GPUs."""
    from testbed.planning.plan import plan
    from testbed.planning.scenario_file import parse_scenario

    data = {"name": "x", "fabric": {"kind": "elect-flat", "hosts": 8, "gpu_bandwidth_gbps": 100},
            "workload": {"kind": "model", "model": {"name": "megatron", "mp": 8, "degree": 1, "global_batch": 8}}}
    with pytest.raises(InputError, match=r"raise the degree .*sits on 1 of the 8.*more GPUs \(fabric.hosts\)"):
        plan(parse_scenario(data, "s.yaml"))


def test_an_op_kind_the_placer_does_not_know_is_refused(tmp_path):
    """An unknown kind in a profile was accepted and changed the result (treated as memory-bound)."""
    from testbed.placer.profiles import load_user_profile

    path = tmp_path / "p.json"
    path.write_text(json.dumps({"name": "p", "ops": [{"name": "a", "kind": "lstm", "compute_us_per_sample": 1,
                                                      "output_bytes": 10}]}))
    with pytest.raises(InputError, match=r"ops\.0\.kind: Input should be 'conv', 'linear'"):
        load_user_profile(path)


def test_many_jobs_are_named_in_short():
    """512 two-GPU jobs printed a line of 512 jobs' times (and took minutes, each job alone rebuilt
    every other job's schedule)."""
    from testbed.planning.plan import plan
    from testbed.planning.scenario_file import parse_scenario

    jobs = [{"name": f"j{i}", "gpus": [2 * i, 2 * i + 1],
             "workload": {"kind": "collective", "collective": "allreduce", "bytes": 1000}} for i in range(12)]
    found = plan(parse_scenario({"name": "x", "fabric": {"kind": "elect-flat", "hosts": 24, "gpu_bandwidth_gbps": 100},
                                 "jobs": jobs}, "s.yaml"))
    assert "j7 " in found.prediction.formula and "j8 " not in found.prediction.formula
    assert found.prediction.formula.endswith("and 4 more") and len(found.jobs) == 12


def test_a_sweep_of_sip_rings_bandwidth_changes_what_a_wavelength_carries(tmp_path):
    """Sweeping gpu_bandwidth_gbps on SiP-Ring kept its wavelengths' rate: 100 and 400 Gb/s predicted
    the same, where `predict` warned. With wavelength_gbps unset a wavelength carries
    B / W, and 4 times B predicts a shorter iteration."""
    import csv

    out = cli("sweep", "scenarios/ring-allreduce.yaml", "--predict-only", "--set", "fabric.gpu_bandwidth_gbps=100,400",
              "--out", str(tmp_path / "sw"))
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader((tmp_path / "sw" / "results.csv").open()))
    predicted = {row["fabric.gpu_bandwidth_gbps"]: float(row["predicted_s"]) for row in rows}
    assert len(predicted) == 2 and predicted["400"] < predicted["100"]
    # Setting the rate as well, a point whose wavelengths cannot carry its B is refused.
    out = cli("sweep", "scenarios/ring-allreduce.yaml", "--predict-only", "--set", "fabric.gpu_bandwidth_gbps=100,400",
              "--set", "fabric.wavelength_gbps=25", "--out", str(tmp_path / "refused"))
    assert out.returncode == 2 and "is not gpu_bandwidth_gbps (400 Gb/s)" in out.stdout + out.stderr


def test_a_profile_of_twenty_thousand_ops_loads_in_linear_work(tmp_path):
    """A 20,000-op chain: every backward op looked up its forward op by rebuilding the name index
    (20,000² lookups, minutes), and the pure-Python YAML parser took half a minute."""
    from testbed.placer.profiles import load_user_profile

    lines = ["name: big", "ops:"] + [
        f"  - {{name: o{i}, kind: linear, compute_us_per_sample: 5, output_bytes: 4096"
        f"{f', deps: [o{i - 1}]' if i else ''}}}" for i in range(20_000)]
    path = tmp_path / "big.yaml"
    path.write_text("\n".join(lines) + "\n")
    graph = load_user_profile(path)
    assert len(graph.ops) == 40_000 and graph.op("o19999.bwd").compute_us_per_sample == 10.0

"""The example Chakra trace (tensor, pipeline and data parallelism on 8 ranks) replayed over
Mininet as a DAG, on Elect-Flat and on SiP-Ring: exact sums, iterations within RATIO_BAND of the
DAG oracle, the run faithful, skipped nodes counted in results.json."""

from __future__ import annotations

import json

import pytest

from testbed.emulation.run import Runner
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario, parse_scenario

from ..conftest import ROOT
from .conftest import assert_faithful, assert_iterations_match_the_oracle

pytestmark = pytest.mark.root


@pytest.mark.parametrize("name", ["chakra-flat", "chakra-sip-ring"])
def test_example_chakra_trace_replays_as_a_dag(tmp_path, machine_state, name):
    # Two measured iterations (the scenarios have three): SiP-Ring's 100 µs periods hold the dilation
    # at 1,000, so each costs seconds of wall time.
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / f"{name}.yaml"), {"workload.iterations": 2})
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert_iterations_match_the_oracle(result)
    assert_faithful(result)
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert saved["skipped_trace_nodes"] == {"METADATA_NODE": 8}


@pytest.mark.parametrize(("kind", "ranks"), [("custom_ring", 8), ("gather", 8), ("scatter", 16)])
def test_traces_laid_out_as_astra_sims_run_on_elect_flat(tmp_path, machine_state, kind, ranks):
    """ASTRA-sim's custom-collective layout (every rank sends before it receives: it deadlocked
    when a send waited for its receive), a GATHER (seven senders into one NIC) and a SCATTER from
    one root to 15 (its whole buffer queued in the root's link), 1 MiB, written with mlc-chakra by
    examples/astra_sim_traces.py."""
    pytest.importorskip("chakra.src.generator.generator", reason="mlc-chakra (setup.sh installs it)")
    import math
    import sys

    sys.path.insert(0, str(ROOT / "examples"))
    import astra_sim_traces

    directory, _ = astra_sim_traces.write_all(tmp_path / "traces", ranks, 1_048_576)[kind]
    scenario = parse_scenario({"name": kind, "fabric": {"kind": "elect-flat", "hosts": ranks, "gpu_bandwidth_gbps": 100,
                                                        "latency_us": 5},
                               "workload": {"kind": "chakra", "path": str(directory), "iterations": 2}}, kind)
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert_iterations_match_the_oracle(result)
    assert_faithful(result)
    if kind == "scatter":
        # The root queues 15/16 of 1 MiB at once: 78.6 µs at 100 Gb/s, dilated; its hosts' subnet
        # route waits twice that before a retransmission timeout (spurious ones before, at 200 ms).
        queue_wall_s = result["dilation"] * 15 / 16 * 1_048_576 * 8 / 100e9
        topology = json.loads((tmp_path / "run" / "topology.json").read_text())
        assert topology["rto_min_ms"] == math.ceil(2e3 * queue_wall_s) > 1000


@pytest.mark.parametrize("kind", ["reduce", "alltoall"])
def test_traces_on_sip_ring_share_relayed_lightpaths_as_predicted(tmp_path, machine_state, kind):
    """1 MiB on 8 GPUs of SiP-Ring (4 wavelengths of 25 Gb/s): a binomial reduce whose first round
    relays one flow over another's one-wavelength lightpath, and a pairwise all-to-all whose steps
    relay through GPUs that send their own. They came out 0.88 and 0.89-0.92 of predicted while a
    host's own flow got a quarter of a lightpath it shared with a relayed one, TCP's 64 KB
    super-packets passed the lightpath's shaping at once, the oracle priced other relay paths than
    the routes took, and collective messages moved before their receive was posted."""
    pytest.importorskip("chakra.src.generator.generator", reason="mlc-chakra (setup.sh installs it)")
    import sys

    sys.path.insert(0, str(ROOT / "examples"))
    import astra_sim_traces

    directory, _ = astra_sim_traces.write_all(tmp_path / "traces", 8, 1_048_576)[kind]
    fabric = {"kind": "sip-ring", "hosts": 8, "gpu_bandwidth_gbps": 100, "latency_us": 5, "wavelengths": 4,
              "wavelength_gbps": 25, "reconfig_us": 25, "estimate_period_us": 100}
    scenario = parse_scenario({"name": kind, "fabric": fabric,
                               "workload": {"kind": "chakra", "path": str(directory), "iterations": 2}}, kind)
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert_iterations_match_the_oracle(result)
    assert_faithful(result)

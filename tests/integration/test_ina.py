"""In-network aggregation over Mininet: the node program in its own host with a port per GPU.
Exact sums with 0, 1 and 5% loss on the links and in the node, two concurrent jobs on shared
slots, INA against ring on the same fabric, and a capture that decodes with the INA layer."""

from __future__ import annotations

import pytest

from testbed.emulation.run import Runner
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario

from ..conftest import ROOT
from .conftest import (
    assert_faithful,
    assert_iterations_match_the_oracle,
    assert_monitor_ok,
    steal_disturbed,
    undisturbed_times_s,
)

pytestmark = pytest.mark.root


def run(tmp_path, name, overrides, **runner):
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / name), {"workload.iterations": 2, **overrides})
    result = Runner(prepare(scenario), tmp_path / "run", **runner).execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"] and len(result["iteration_times_s"]) == 2
    return result


def test_ina_allreduce_matches_the_oracle_and_halves_ring(tmp_path, machine_state):
    overrides = {"fabric.hosts": 4, "workload.bytes": 50_000_000}
    # ring all-reduce on the same fabric, forwarded by the node's kernel, at INA's rates (INA's
    # passes need more emulated bytes than ring's messages: enough chunks to stream)
    ina = run(tmp_path / "ina", "ina-allreduce.yaml", overrides)
    ring = run(tmp_path / "ring", "ina-allreduce.yaml", {**overrides, "workload.algorithm": "ring",
                                                         "emulation.dilation": ina["dilation"],
                                                         "emulation.byte_scale": ina["byte_scale"]})
    for result in (ina, ring):
        assert_faithful(result)
        assert_iterations_match_the_oracle(result)
    assert ina["ina"]["node"]["counters"]["results_multicast"] > 0
    # Lossless links: a retransmission only when a result came back later than the adaptive timeout
    # (a host descheduled for a moment on a loaded machine; CI saw 2 in one run), never a pattern.
    assert ina["ina"]["workers"].get("retransmits", 0) <= 1e-3 * ina["ina"]["node"]["counters"]["received"] \
        or steal_disturbed(ina)
    if undisturbed_times_s(ina) and undisturbed_times_s(ring):  # else the hypervisor took the cores away
        measured = min(undisturbed_times_s(ina)) / min(undisturbed_times_s(ring))
        theory = ina["predicted_iteration_time_s"] / ring["predicted_iteration_time_s"]
        assert abs(measured / theory - 1) <= 0.1, (measured, theory)


# Lossy runs send every real packet (byte scale 1), and at 5% a third of the chunks wait out a
# timeout: smaller buffers keep each test under a minute.
@pytest.mark.parametrize("loss_frac, size", [(0.01, 2_000_000), (0.05, 500_000)])
def test_ina_sums_stay_exact_under_loss(tmp_path, machine_state, loss_frac, size):
    result = run(tmp_path, "ina-lossy.yaml", {"fabric.link_loss_frac": loss_frac, "fabric.node_drop_frac": loss_frac,
                                              "workload.bytes": size})
    node, workers = result["ina"]["node"]["counters"], result["ina"]["workers"]
    assert node["injected_drops"] > 0 and workers["retransmits"] > 0
    assert_monitor_ok(result, "ina_loss")
    # Every retransmission followed a wait for the chunk's timeout, which the breakdown shows.
    assert workers["timeout_wait_s"] > 0 and result["breakdown"]["retransmission_s"] > 0


def test_two_jobs_on_shared_slots_keep_their_sums_apart(tmp_path, machine_state):
    """Each job's inputs differ (per-group data), so a sum mixing the jobs would fail the check."""
    result = run(tmp_path, "ina-two-jobs.yaml", {"workload.bytes": 20_000_000}, capture_packets=300)
    node = result["ina"]["node"]
    assert sorted(node["jobs"]) == ["1", "2"]
    assert node["counters"].get("collisions", 0) > 0 and result["ina"]["workers"]["fallback_results_multicast"] > 0
    # The oracle simulates the node's shared slots with the workers' own hash over store-and-forward
    # links, which the INA links emulate (a one-frame bucket, each packet held its frame time at the
    # receiver): runs counted 12.3-12.6% of the chunks colliding against 11.3% simulated, and the
    # shipped scenario measured 1.03-1.10 of its prediction: within the band every run must meet.
    assert_iterations_match_the_oracle(result)
    from scapy.all import rdpcap

    from hosts.ina.protocol import INA

    packets = [p for p in rdpcap(str(tmp_path / "run" / "capture.pcap")) if INA in p]
    assert len(packets) == 300
    assert {p[INA].job for p in packets} <= {1, 2} and any(p[INA].flags.RESULT for p in packets)

"""SiP-OCS and SiP-Ring on Mininet: circuits and lightpaths are the only paths, relays carry the
rest, lightpaths hold their planned capacity, and probes see each reconfiguration's dark time."""

from __future__ import annotations

import json
import statistics
import time

import pytest

from bench.probes import optical_fabric, probe
from testbed.core.calibration import load_calibration
from testbed.planning.scenario_file import make_fabric

from .conftest import (
    RATIO_BAND,
    assert_iterations_match_the_oracle,
    assert_monitor_ok,
    assert_ratio_in_band,
    disturbed_iterations,
)

pytestmark = pytest.mark.root

RING3 = [[0, 1, 0], [0, 0, 1], [1, 0, 0]]  # 0→1→2→0: one-way circuits around a ring of 3


def test_ocs_without_a_circuit_no_packet_passes_and_a_relay_carries_it(tmp_path, machine_state):
    fabric = make_fabric(kind="sip-ocs", hosts=3, gpu_bandwidth_gbps=10, ocs_switches=1)
    with optical_fabric(fabric, 20e6, tmp_path, RING3) as (live, api):
        assert sorted(map(tuple, api.plan()["circuits"])) == [(0, 0, 1), (0, 1, 2), (0, 2, 0)]
        h1 = live.fabric.host(0)
        # Through the relay (GPU 1): arrives with one hop more.
        relayed = probe(live, 0, 2, tmp_path, duration_s=0.3)
        assert relayed.arrivals and set(relayed.hops) == {2}
        # Straight to GPU 2 on the OCS port, where no circuit exists: the switch passes nothing.
        h1.cmd("ip route replace 10.0.0.3/32 dev h1-eth0")
        direct = probe(live, 0, 2, tmp_path, duration_s=0.3)
        assert direct.arrivals == []
        h1.cmd("ip route replace 10.0.0.3/32 via 10.0.0.2 dev h1-eth0 onlink")
        again = probe(live, 0, 2, tmp_path, duration_s=0.3)
        assert again.arrivals and set(again.hops) == {2}


def test_ocs_reconfiguration_is_dark_for_the_configured_time(tmp_path, machine_state):
    fabric = make_fabric(kind="sip-ocs", hosts=3, gpu_bandwidth_gbps=10, ocs_switches=1)
    dark_us = 150_000  # at dilation 1: 150 ms during which no circuit exists
    s = load_calibration().slowness  # 1 here; a machine s times slower runs the probe s times dilated
    with optical_fabric(fabric, 20e6, tmp_path, RING3, dilation=s) as (live, api):
        api.settings(reconfig_us=dark_us)
        ident = []
        result = probe(live, 0, 1, tmp_path, duration_s=1.0 * s, interval_s=5e-4 * s, during_at_s=0.3 * s,
                       during=lambda: ident.append(api.set_circuits([(0, 0, 2), (0, 2, 1), (0, 1, 0)])))
        event = api.wait_for(ident[0])
        gap, before, after = result.largest_gap()
        assert before <= event["dark_start_s"] + 0.01 * s and after >= event["restored_s"] - 0.01 * s
        # The ±10% accuracy target is measured by bench/optical.py; here the dark time must show,
        # not run long by more than the controller's and datapath's latency on a busy machine.
        assert 0.9 <= gap / (dark_us * 1e-6 * s) <= 1.25
        assert event["measured_dark_s"] == pytest.approx(dark_us * 1e-6 * s, rel=0.10)
        # Before: the direct circuit 0→1; after: relayed by GPU 2 (0→2→1).
        assert result.hops[0] == 1 and result.hops[-1] == 2


def _tcp_rate_bps(live, src: int, dst: int, seconds: float = 3.0) -> float:
    server = live.fabric.host(dst).popen(["iperf3", "-s", "-1", "-p", "5302"])
    try:
        deadline = time.monotonic() + 10
        while ":5302 " not in live.fabric.host(dst).cmd("ss -ltnH 'sport = :5302'") + " ":
            assert time.monotonic() < deadline, "iperf3 did not start"
            time.sleep(0.02)
        ip = live.fabric.topology.hosts[dst].ip
        out = live.fabric.host(src).cmd(f"iperf3 -c {ip} -p 5302 -t {seconds} -J")
    finally:
        server.wait(timeout=20)

    return json.loads(out)["end"]["sum_received"]["bits_per_second"]


def test_ring_lightpath_carries_traffic_only_on_its_planned_wavelengths(tmp_path, machine_state):
    fabric = make_fabric(kind="sip-ring", hosts=4, gpu_bandwidth_gbps=100, wavelengths=4, wavelength_gbps=25)
    host_rate = 80e6  # emulated: 20 Mb/s per wavelength
    ring = [(i, (i + 1) % 4, 1) for i in range(4)] + [((i + 1) % 4, i, 1) for i in range(4)]
    traffic = [[0] * 4 for _ in range(4)]
    with optical_fabric(fabric, host_rate, tmp_path, traffic) as (live, api):
        api.wait_for(api.set_lightpaths(ring + [(0, 2, 2)]))
        assert set(probe(live, 0, 2, tmp_path, duration_s=0.3).hops) == {1}  # the lightpath, untouched by GPU 1
        two = _tcp_rate_bps(live, 0, 2)
        api.wait_for(api.set_lightpaths(ring + [(0, 2, 1)]))
        one = _tcp_rate_bps(live, 0, 2)
        assert two == pytest.approx(2 * 20e6, rel=0.12)
        assert one == pytest.approx(20e6, rel=0.12)
        api.wait_for(api.set_lightpaths(ring))
        assert set(probe(live, 0, 2, tmp_path, duration_s=0.3).hops) == {2}  # no lightpath: relayed


def test_ring_new_lightpath_carries_traffic_after_the_retuning_time(tmp_path, machine_state):
    fabric = make_fabric(kind="sip-ring", hosts=4, gpu_bandwidth_gbps=100, wavelengths=4, wavelength_gbps=25)
    ring = [(i, (i + 1) % 4, 1) for i in range(4)] + [((i + 1) % 4, i, 1) for i in range(4)]
    # Userspace OVS can hold the first packets on a new rule for tens of ms here (up to ~140 ms
    # seen while it revalidates after rule changes): a long dark time keeps that small against it.
    dark_us = 500_000
    s = load_calibration().slowness  # 1 here; a machine s times slower runs the probe s times dilated
    with optical_fabric(fabric, 80e6, tmp_path, [[0] * 4 for _ in range(4)], dilation=s) as (live, api):
        api.wait_for(api.set_lightpaths(ring))
        api.settings(reconfig_us=dark_us)
        asked = []

        def retune():
            asked.append(time.monotonic())
            asked.append(api.set_lightpaths(ring + [(0, 2, 1)]))

        result = probe(live, 0, 2, tmp_path, duration_s=1.5 * s, interval_s=5e-4 * s, during_at_s=0.3 * s,
                       during=retune)
        event = api.wait_for(asked[1])
        first_direct = result.first_with_hops(1)
        assert first_direct is not None
        # Relayed until the new wavelength is tuned, then direct.
        assert result.hops[0] == 2
        waited = first_direct["arrived"] - event["dark_start_s"]
        assert 0.9 <= waited / (dark_us * 1e-6 * s) <= 1.25  # ±10% is the bench's target (bench/optical.py)
        assert statistics.median(result.hops[-50:]) == 1


# bench/optical.py on a 2-core machine measured every fabric within 1.00-1.04 at 8 and 16 GPUs.
# SiP-OCS at 16 GPUs is the case where acknowledgements relayed around one-way circuits took 30%
# of the circuits' capacity until they got their own allowance (it ran 1.29-1.31).
CASES = [("cluster-allreduce", 8), ("ocs-allreduce", 8), ("ocs-allreduce", 16), ("ring-allreduce", 8)]


@pytest.mark.parametrize("name, hosts", CASES)
def test_ring_allreduce_scenario_matches_the_oracle_on_each_fabric(name, hosts, tmp_path, machine_state):
    from testbed.emulation.run import Runner
    from testbed.planning.overrides import apply_overrides
    from testbed.planning.plan import prepare
    from testbed.planning.scenario_file import load_scenario

    from ..conftest import ROOT

    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / f"{name}.yaml"),
                               {"workload.iterations": 2, "fabric.hosts": hosts})
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert_iterations_match_the_oracle(result)
    if name == "ring-allreduce":  # the controller re-plans every period; whatever it retunes is on time
        assert_monitor_ok(result, "dark_time")


def test_placed_schedule_on_sip_ring_matches_the_schedule_oracle(tmp_path, machine_state):
    """The placer's ResNet-50 (2-way MP × 2-way DP) over lightpaths that the controller retunes every
    period. Its DP all-reduce crosses the lightpath to the GPU two hops away, which the oracle
    rates at what the plan gives it (it ran 1.06-1.13× over an oracle that gave it all of B).

    A global batch of 8 instead of the scenario's 16: the same placement and steps with half the
    bytes and compute, so the rounds at the periods' dilation (1,000) take half the wall time. The
    controller retunes whenever a re-plan gains its 25 µs (left to pick, the rule stands still:
    retuning gains 1.2 ms, about what the controller's timing alone moves the iteration)."""
    from testbed.emulation.run import Runner
    from testbed.planning.plan import prepare
    from testbed.planning.scenario_file import load_scenario, parse_scenario

    from ..conftest import ROOT

    spec = load_scenario(ROOT / "scenarios" / "placed-resnet-ring.yaml").model_dump(exclude_unset=True)
    spec["workload"]["model"]["global_batch"] = 8
    spec["fabric"]["retune_threshold_us"] = 25
    result = Runner(prepare(parse_scenario(spec)), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert_ratio_in_band(result, 0)
    # Its phases (MP transfers, then the DP ring) change the traffic enough that some re-plans are
    # worth their dark time: each is timed by the hosts.
    assert result["reconfigurations"] >= 1
    assert_monitor_ok(result, "dark_time")


def test_multi_shot_ocs_replans_circuits_during_training(tmp_path, machine_state):
    """Circuits re-planned every period from the live traffic matrix: the MP phase and the DP ring
    get different circuits, every change is dark for its configured time, and no pair the job
    needs is ever left without a path. Told to retune whenever a re-plan gains its dark time (on
    its own the rule stands still here: retuning every phase costs more than it gains)."""
    from testbed.emulation.run import Runner
    from testbed.planning.plan import prepare
    from testbed.planning.scenario_file import load_scenario, parse_scenario

    from ..conftest import ROOT

    spec = load_scenario(ROOT / "scenarios" / "ocs-multishot.yaml").model_dump(exclude_unset=True)
    spec["fabric"]["retune_threshold_us"] = 200
    result = Runner(prepare(parse_scenario(spec)), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert result["reconfigurations"] >= 2 and result["breakdown"]["reconfiguration_s"] > 0
    assert_monitor_ok(result, "dark_time")
    # The controller retunes only where a re-plan gains more than its dark time, as the oracle's
    # re-plans do. The yardstick re-plans along one trajectory of measured estimates; the live
    # counters differ run to run, and a run whose controller retuned more often (1 predicted retune,
    # 14 made once; 5-7 typical) pays the extra dark time it measured, which the iteration is
    # judged with: RATIO_BAND (twice the widest deviation the benches saw) around that.
    measured_dark_s = result["breakdown"]["reconfiguration_s"]
    extra_dark_s = max(0.0, measured_dark_s - result["predicted_breakdown"]["reconfiguration_s"])
    ratio = result["iteration_times_s"][0] / (result["predicted_iteration_time_s"] + extra_dark_s)
    assert RATIO_BAND[0] <= ratio and (ratio <= RATIO_BAND[1] or 0 in disturbed_iterations(result)), \
        (ratio, result["emulated_over_predicted"], result["reconfigurations"], extra_dark_s)
    # Retuning on noise changed the plan in nearly every period; a run that retunes at the phase
    # changes does so in a few of them (6-8 of about 70 periods here; once 16, at a lower
    # calibration). So the bound counts the periods the agents ran, 2 ms (10 × 200 µs) dilated each.
    timings = result["timings_s"]
    periods = (timings["agents_done_s"] - timings["agents_started_s"]) / (10 * 200e-6 * result["dilation"])
    assert result["reconfigurations"] <= periods / 3, f"the controller retunes on noise ({periods:.0f} periods)"


def test_partitioned_jobs_each_get_their_switches_on_multi_shot_ocs(tmp_path, machine_state):
    """Two 4-GPU ring all-reduces on 4 optical switches, partitioned: each job's circuits only on
    its 2 switches (B/2 to its next GPU; the 4 of a shared plan would run twice as fast), each job
    at its own pace. Hand, M = 40 MB: 6·(5 µs + 10 MB·8/50 Gb/s) = 9.63 ms a job."""
    from testbed.emulation.run import Runner
    from testbed.planning.plan import prepare
    from testbed.planning.scenario_file import parse_scenario

    ring = {"kind": "collective", "collective": "allreduce", "algorithm": "ring", "bytes": 40_000_000,
            "iterations": 2}
    scenario = parse_scenario({
        "name": "partitioned-ocs", "seed": 2,
        "fabric": {"kind": "sip-ocs", "hosts": 8, "gpu_bandwidth_gbps": 100, "latency_us": 5, "ocs_switches": 4,
                   "reconfig_us": 200, "multi_shot": True},
        "jobs": [{"name": "a", "gpus": 4, "workload": ring}, {"name": "b", "gpus": 4, "workload": ring}],
        "job_sharing": "partitioned", "emulation": {"dilation": "auto"}}, "partitioned-ocs")
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    disturbed = disturbed_iterations(result)
    for job in result["jobs"].values():
        assert job["predicted_iteration_time_s"] == pytest.approx(6 * (5e-6 + 10e6 * 8 / 50e9), rel=1e-6)
        for i, ratio in enumerate(job["emulated_over_predicted"]):
            assert RATIO_BAND[0] <= ratio and (ratio <= RATIO_BAND[1] or i in disturbed), job


def test_an_all_to_all_relayed_over_too_few_circuits_matches_the_oracle(tmp_path, machine_state):
    """4 GPUs, 2 switches: a GPU has circuits to 2 of its 3 peers and relays to the third; the
    all-to-all's rounds share the circuits as the oracle's simulation shares them."""
    from testbed.emulation.run import Runner
    from testbed.planning.plan import prepare
    from testbed.planning.scenario_file import parse_scenario

    scenario = parse_scenario({"name": "a2a", "fabric": {"kind": "sip-ocs", "hosts": 4, "gpu_bandwidth_gbps": 100,
                                                         "latency_us": 2, "ocs_switches": 2},
                               "workload": {"kind": "collective", "collective": "alltoall", "bytes": 16_000_000,
                                            "iterations": 2}}, "test")
    result = Runner(prepare(scenario), tmp_path / "run").execute()
    assert result["status"] == "ok", result["error"]
    assert result["sums_correct"]
    assert_iterations_match_the_oracle(result)
    assert result["fidelity"]["ok"], result["fidelity"]

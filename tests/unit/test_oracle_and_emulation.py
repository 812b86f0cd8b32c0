import json
import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.core.calibration import Calibration
from testbed.core.dilation import MIN_MESSAGE_BYTES, resolve_emulation
from testbed.core.shaping import htb_commands, line_rate_bps
from testbed.model.units import Dilation
from testbed.network.collectives import ring_allreduce_time_s
from testbed.planning.plan import predict_scenario, prepare
from testbed.planning.scenario_file import parse_scenario
from testbed.shared.collective_plans import ring_allreduce_traffic
from testbed.workloads.all_kinds import schedule_for
from testbed.workloads.sizing import min_dilation_for

CALIBRATION = Calibration(capacity_bps=1.2e9, timer_error_s=50e-6, sleep_overshoot_s=80e-6, datapath="user",
                          measured_at="test")


def scenario(hosts=8, gbps=100.0, size=100_000_000, latency_us=5.0, **emulation):
    return parse_scenario({
        "name": "t",
        "fabric": {"kind": "elect-flat", "hosts": hosts, "gpu_bandwidth_gbps": gbps, "latency_us": latency_us},
        "workload": {"kind": "collective", "collective": "allreduce", "bytes": size},
        "emulation": emulation,
    })


def test_ring_formula_matches_design():
    # 2(n-1)·α + 2(n-1)/n · M/B with n=8, α=5 µs, M=100 MB, B=100 Gb/s
    expected = 14 * 5e-6 + 14 / 8 * 100e6 * 8 / 100e9
    assert ring_allreduce_time_s(8, 100e6, 100e9, 5e-6) == pytest.approx(expected)
    s = scenario()
    assert predict_scenario(s).iteration_time_s == pytest.approx(expected)


def test_the_byte_scale_is_lowered_until_every_ranks_buffers_fit_in_memory():
    """8 ranks of 100 MB at dilation 1,000 and 50 Mb/s a host would scale bytes by 1,000 x 50e6 /
    100e9 = 0.5; with 4 GB of memory, half of it for 4 copies of 800 MB of buffers, at most
    2e9 / 3.2e9 = 0.625 fits (unchanged), with 1 GB 0.15625. The dilation stays."""
    s = scenario(8, 100.0, 100_000_000, dilation=1000)
    predicted = predict_scenario(s).iteration_time_s
    roomy = replace(CALIBRATION, capacity_bps=8 * 50e6 / 0.6, memory_bytes=4e9)  # runs offer 60%
    plan = resolve_emulation(s, predicted, 1e-3, 1e7, 8, roomy, buffer_bytes=8e8)
    assert plan.dilation.byte_scale == pytest.approx(0.5)
    small = replace(roomy, memory_bytes=1e9)
    plan = resolve_emulation(s, predicted, 1e-3, 1e7, 8, small, buffer_bytes=8e8)
    assert plan.dilation.byte_scale == pytest.approx(0.15625) and plan.dilation.dilation == 1000
    assert any("memory" in note for note in plan.notes)


def test_a_slow_machine_dilates_dark_times_by_its_slowness():
    """A 25 us dark time must last 10 times the controller's 1 ms (DARK_TOLERANCE 10%): dilation
    400; a machine whose agents take 3 ms a step (slowness 3 against 1 ms) needs 1,200. (A period
    of 10 ms leaves the counters' refresh out of it: 10 refreshes of 10 ms need dilation 10.)"""
    fabric = parse_scenario({"name": "t", "fabric": {"kind": "sip-ring", "hosts": 4, "reconfig_us": 25,
                                                        "gpu_bandwidth_gbps": 100, "wavelengths": 4,
                                                        "estimate_period_us": 10_000},
                             "workload": {"kind": "collective", "collective": "allreduce", "bytes": 1e6}}).fabric
    assert min_dilation_for(fabric) == pytest.approx(400)
    assert min_dilation_for(fabric, replace(CALIBRATION, agent_step_s=3e-3).slowness) == pytest.approx(1200)


def test_a_period_lasts_ten_counter_refreshes():
    """The switches refresh their counters every 10 ms (scripts/setup.sh): a 100 us period needs
    dilation 1,000 to last ten of them, a 1 ms period 100 (then the 25 us dark time's 400 rules);
    one-shot SiP-OCS never re-plans, so only its dark time counts."""
    def section(**fields):
        return parse_scenario({"name": "t", "fabric": {"hosts": 4, "gpu_bandwidth_gbps": 100, **fields},
                               "workload": {"kind": "collective", "collective": "allreduce", "bytes": 1e6}}).fabric
    ring = {"kind": "sip-ring", "wavelengths": 4, "reconfig_us": 25}
    assert min_dilation_for(section(**ring, estimate_period_us=100)) == pytest.approx(1000)
    assert min_dilation_for(section(**ring, estimate_period_us=1000)) == pytest.approx(400)
    ocs = {"kind": "sip-ocs", "ocs_switches": 2, "reconfig_us": 200}
    assert min_dilation_for(section(**ocs)) == pytest.approx(50)
    assert min_dilation_for(section(**ocs, multi_shot=True, estimate_period_us=100)) == pytest.approx(1000)


@settings(max_examples=200, deadline=None)
@given(hosts=st.integers(2, 64), size=st.integers(1, 10**9))
def test_traffic_matrix_is_each_ranks_ring_share(hosts, size):
    matrix = ring_allreduce_traffic(hosts, size)
    for rank, row in enumerate(matrix):
        assert [i for i, b in enumerate(row) if b] in ([(rank + 1) % hosts], [])
    # Each chunk crosses n-1 links twice: total 2(n-1)·M.
    assert sum(map(sum, matrix)) == 2 * (hosts - 1) * size


def test_dilation_maps_units():
    d = Dilation(dilation=100, byte_scale=0.1)
    assert d.emulated_rate_bps(100e9) == pytest.approx(100e6)
    assert d.real_time_s(d.emulated_time_s(0.25)) == pytest.approx(0.25)
    assert d.emulated_bytes(1000) == 100


def test_auto_sizes_rates_by_the_agents_ring_where_it_forwards_less_than_the_datapath():
    """8 hosts, capacity 1.2 Gb/s but the agents' ring 0.4 Gb/s: 0.6 of 0.4 Gb/s over 8
    senders is 30 Mb/s per host; with the agents faster than the datapath, 0.6 of 1.2 / 8 = 90."""
    s = scenario(8, 100.0, 100_000_000)
    predicted = predict_scenario(s).iteration_time_s
    step = predicted / 14
    slow = replace(CALIBRATION, agent_capacity_bps=0.4e9)
    assert slow.usable_capacity_bps == 0.4e9
    plan = resolve_emulation(s, predicted, step, 100_000_000 / 8, 8, slow)
    assert plan.host_rate_bps == pytest.approx(30e6) and plan.capacity_bps == 0.4e9
    fast = replace(CALIBRATION, agent_capacity_bps=2e9)
    assert resolve_emulation(s, predicted, step, 100_000_000 / 8, 8, fast).host_rate_bps == pytest.approx(90e6)


def test_a_slow_machine_waits_longer_for_the_controller():
    """Agents at 12 ms a step (the software-emulated VM) are 12 times slower than the 1 ms reference:
    the 32 s an 8-host fabric gets to be programmed becomes 384 s; faster machines keep 32 s."""
    from testbed.emulation.live import ready_timeout_s

    assert replace(CALIBRATION, agent_step_s=12e-3).slowness == pytest.approx(12)
    assert replace(CALIBRATION, agent_step_s=0.6e-3).slowness == 1.0 and CALIBRATION.slowness == 1.0
    assert ready_timeout_s(8) == pytest.approx(32.0)
    assert ready_timeout_s(8, 12.0) == pytest.approx(384.0)


def test_a_slow_agent_step_raises_the_dilation_above_the_timers_floor():
    """Events must be 50 times the host's per-message cost (2% tolerance): 2 ms by default, so a
    shortest event of 1 ms needs dilation 100; agents measured at 5 ms a step need 250."""
    s = scenario(8, 100.0, 100_000_000)
    predicted = predict_scenario(s).iteration_time_s
    assert resolve_emulation(s, predicted, 1e-3, 1e9, 8, CALIBRATION).dilation.dilation >= 100 * (1 - 1e-9)
    slow = replace(CALIBRATION, agent_step_s=5e-3)
    assert resolve_emulation(s, predicted, 1e-3, 1e9, 8, slow).dilation.dilation == pytest.approx(250)


@settings(max_examples=200, deadline=None)
@given(hosts=st.integers(2, 64), gbps=st.floats(1, 10_000), size=st.integers(10_000, 10**10),
       latency_us=st.floats(0, 50))
def test_auto_stays_within_capacity_timers_and_message_floor(hosts, gbps, size, latency_us):
    s = scenario(hosts, gbps, size, latency_us)
    predicted = predict_scenario(s).iteration_time_s
    step = predicted / (2 * (hosts - 1))
    plan = resolve_emulation(s, predicted, step, size / hosts, hosts, CALIBRATION)
    d = plan.dilation
    assert plan.host_rate_bps * hosts <= 0.6 * CALIBRATION.capacity_bps * (1 + 1e-9)
    assert d.emulated_time_s(step) >= 0.1 * (1 - 1e-9)  # 2 ms of host overhead is at most 2%
    assert d.byte_scale * size / hosts >= MIN_MESSAGE_BYTES * (1 - 1e-9)
    assert not any("exceeds the calibrated" in n for n in plan.notes)


def test_fixed_values_are_honoured_and_overload_is_noted():
    s = scenario(dilation=1.0, byte_scale=1.0)
    predicted = predict_scenario(s).iteration_time_s
    plan = resolve_emulation(s, predicted, predicted / 14, 100e6 / 8, 8, CALIBRATION)
    assert (plan.dilation.dilation, plan.dilation.byte_scale) == (1.0, 1.0)
    assert any("exceeds the calibrated" in n for n in plan.notes)


def test_htb_shapes_payload_rate():
    commands = htb_commands("h1-eth0", 100e6)
    assert commands[0].startswith("tc qdisc replace dev h1-eth0 root handle 1: htb")
    assert f"rate {round(line_rate_bps(100e6))}bit" in commands[1]
    assert math.isclose(line_rate_bps(1448), 1514)


@pytest.mark.parametrize("hosts", [4, 16, 64])
def test_auto_keeps_the_iteration_long_against_the_ranks_start_spread(hosts):
    from testbed.core.dilation import EVENT_TOLERANCE, START_SPREAD_PER_RANK_S

    s = scenario(hosts)
    predicted = predict_scenario(s).iteration_time_s
    plan = resolve_emulation(s, predicted, predicted, 100e6, hosts, CALIBRATION)
    spread_s = START_SPREAD_PER_RANK_S * hosts
    assert plan.dilation.emulated_time_s(predicted) >= spread_s / EVENT_TOLERANCE * (1 - 1e-9)


def test_warmups_default_by_workload_kind_and_honour_the_scenario():
    assert scenario().warmups() == 2
    assert scenario(warmup_iterations=0).warmups() == 0
    model = parse_scenario({"name": "m", "fabric": {"kind": "elect-flat", "hosts": 8, "gpu_bandwidth_gbps": 100},
                            "workload": {"kind": "model", "model": {"name": "resnet50", "global_batch": 64,
                                                                    "mp": 1, "dp": 8}}})
    assert model.warmups() == 1


def test_warm_up_rounds_of_a_schedule_are_expected_to_skip_compute(tmp_path):
    """GPU 0 computes 5 ms then sends 1 MB to GPU 1, which then computes 3 ms. At 100 Gb/s and
    1 µs, an iteration is 5 ms + (1 µs + 80 µs) + 3 ms = 8.081 ms; a warm-up round, which the
    agents run without compute, is the 81 µs message alone."""
    trace = {"format": "testbed-schedule/1", "name": "two", "hosts": 2, "iterations": 1, "gpus": [
        {"rank": 0, "steps": [{"id": "c", "kind": "compute", "compute_us": 5000.0, "deps": []},
                              {"id": "s", "kind": "send", "peer": 1, "bytes": 1_000_000, "tag": "t", "deps": ["c"]}]},
        {"rank": 1, "steps": [{"id": "r", "kind": "recv", "peer": 0, "bytes": 1_000_000, "tag": "t", "deps": []},
                              {"id": "c", "kind": "compute", "compute_us": 3000.0, "deps": ["r"]}]}]}
    (tmp_path / "two.json").write_text(json.dumps(trace))
    spec = {"name": "two", "fabric": {"kind": "elect-flat", "hosts": 2, "gpu_bandwidth_gbps": 100, "latency_us": 1},
            "workload": {"kind": "trace", "trace": str(tmp_path / "two.json"), "iterations": 3},
            "emulation": {"warmup_iterations": 1}}
    prepared = prepare(parse_scenario(spec), CALIBRATION)
    assert prepared.prediction.iteration_time_s == pytest.approx(8.081e-3, rel=1e-3)
    s = prepared.plan.dilation.dilation
    assert prepared.plan.expected_wall_s == pytest.approx(s * (3 * 8.081e-3 + 0.081e-3), rel=1e-3)


def test_a_hosts_longest_queue_is_what_it_sends_at_once():
    from testbed.model.schedule import GpuSchedule, RecvStep, Schedule, SendStep
    from testbed.workloads.sizing import longest_host_queue_s

    ring = scenario(hosts=8, gbps=100.0, size=100_000_000)
    # A ring all-reduce sends M/n at a time: 12.5 MB at 100 Gb/s, 1 ms.
    assert longest_host_queue_s(ring, schedule_for(ring)) == pytest.approx(1e-3)
    scatter = parse_scenario({"name": "t", "fabric": {"kind": "elect-flat", "hosts": 16, "gpu_bandwidth_gbps": 100},
                              "workload": {"kind": "collective", "collective": "scatter", "algorithm": "direct",
                                           "bytes": 1_000_000}})
    # A direct scatter's root sends its 15 chunks of M/16 at once: 937.5 KB, 75 µs.
    assert longest_host_queue_s(scatter, schedule_for(scatter)) == pytest.approx(75e-6)
    # Sends posted one after another queue together until the GPU waits: 2 + 3 MB, then 4 MB alone.
    steps = (SendStep("a", peer=1, bytes=2_000_000, tag="a"), SendStep("b", peer=1, bytes=3_000_000, tag="b"),
             RecvStep("c", peer=1, bytes=10, tag="c"), SendStep("d", peer=1, bytes=4_000_000, tag="d"))
    sends = Schedule("t", 2, 1, (GpuSchedule(0, steps), GpuSchedule(1, ())))
    assert longest_host_queue_s(ring, sends) == pytest.approx(5e6 * 8 / 100e9)

"""When the re-planning controller closes its estimation periods, and when a run says the switch's
counters are too stale for them."""

from controller.optical_app import next_period_end
from testbed.emulation.results import counter_refresh_notes
from testbed.planning.scenario_file import make_fabric

RING = {"kind": "sip-ring", "hosts": 8, "gpu_bandwidth_gbps": 400, "wavelengths": 16, "wavelength_gbps": 25,
        "estimate_period_us": 100}


def test_periods_end_on_a_fixed_grid_however_long_planning_took():
    # Planning that ended 0.3 of a period after the last end: the next end is one period on, not
    # a period after planning finished (which stretched every period).
    assert next_period_end(10.0, 1.0, 10.3) == 11.0
    # Planning that overran two ends (at 11 and 12): those periods merge into the one ending at 13.
    assert next_period_end(10.0, 1.0, 12.4) == 13.0
    assert next_period_end(10.0, 1.0, 10.0) == 11.0


def test_stale_counters_are_named_on_a_fabric_that_re_plans():
    fabric = make_fabric(**RING)
    # 100 µs at dilation 1,000 is 100 ms of wall time: a 500 ms refresh is stale, 10 ms is not;
    # at dilation 400 (40 ms) 10 ms is four refreshes a period, too few.
    notes = counter_refresh_notes(fabric, 1000.0, 500)
    assert len(notes) == 1 and "every 500 ms" in notes[0] and "(100 ms of wall time)" in notes[0]
    assert "at least 50000" in notes[0]
    assert counter_refresh_notes(fabric, 1000.0, 10) == []
    assert len(counter_refresh_notes(fabric, 400.0, 10)) == 1
    assert counter_refresh_notes(fabric, 1000.0, None) == []


def test_fabrics_that_do_not_re_plan_get_no_note():
    flat = make_fabric(kind="elect-flat", hosts=8, gpu_bandwidth_gbps=100)
    assert counter_refresh_notes(flat, 1000.0, 500) == []

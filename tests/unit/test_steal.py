"""Steal per iteration, from samples of the kernel's counters, and its monitor: values by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from testbed.core.fidelity import STEAL_TOLERANCE, steal_monitor
from testbed.core.steal import CpuSample, steal_fractions


def test_a_window_between_samples_is_interpolated():
    # 2 cores at 100 ticks/s: 200 ticks a second; 40 of the second second's are stolen.
    samples = [CpuSample(0.0, 0, 0), CpuSample(1.0, 0, 200), CpuSample(2.0, 40, 400)]
    # [1.5, 2.0]: steal 20 -> 40, total 300 -> 400: 20 / 100
    # [0.5, 1.5]: steal 0 -> 20, total 100 -> 300: 20 / 200
    assert steal_fractions(samples, [(1.5, 2.0), (0.5, 1.5)]) == [pytest.approx(0.2), pytest.approx(0.1)]


def test_windows_outside_the_samples_are_not_measured():
    samples = [CpuSample(10.0, 0, 0), CpuSample(11.0, 5, 200)]
    assert steal_fractions(samples, [(8.0, 9.0), (12.0, 13.0)]) == [None, None]
    assert steal_fractions(samples[:1], [(9.0, 12.0)]) == [None]
    # a window reaching past the last sample counts up to it: 5 of 200
    assert steal_fractions(samples, [(10.0, 12.0)]) == [pytest.approx(0.025)]


def test_the_monitor_names_the_disturbed_iterations():
    monitor = steal_monitor([0.01, STEAL_TOLERANCE + 0.01, None, 0.3])
    assert not monitor.ok and monitor.value == 0.3
    assert "iterations 1, 3" in monitor.detail and "30.0%" in monitor.detail
    assert steal_monitor([0.0, STEAL_TOLERANCE]).ok
    assert steal_monitor([None]).ok and steal_monitor([]).value is None


def test_a_calibration_stored_before_steal_was_measured_still_loads(tmp_path):
    from testbed.core.calibration import load_calibration, store_calibration

    path = tmp_path / "calibration.json"
    path.write_text('{"capacity_bps": 1e9, "timer_error_s": 1e-6, "sleep_overshoot_s": 1e-5, '
                    '"datapath": "user", "measured_at": "2026-12-01T00:00:00+00:00"}')
    assert load_calibration(path).measured and load_calibration(path).steal_frac is None
    store_calibration(replace(load_calibration(path), steal_frac=0.25), path)
    assert load_calibration(path).steal_frac == 0.25


def test_busy_share_between_two_samples():
    from testbed.core.steal import busy_fraction

    # 400 ticks pass, 300 of them busy (steal counted in them): 0.75; no ticks: not measured
    assert busy_fraction(CpuSample(0.0, 0, 1000, 200), CpuSample(2.0, 40, 1400, 500)) == 0.75
    assert busy_fraction(CpuSample(0.0, 0, 1000, 200), CpuSample(0.0, 0, 1000, 200)) is None


def test_steal_share_between_two_samples():
    from testbed.core.steal import steal_share

    # 400 ticks pass, 40 of them stolen: 0.1
    assert steal_share(CpuSample(0.0, 10, 1000, 200), CpuSample(2.0, 50, 1400, 500)) == 0.1
    assert steal_share(CpuSample(0.0, 10, 1000), CpuSample(0.0, 10, 1000)) is None

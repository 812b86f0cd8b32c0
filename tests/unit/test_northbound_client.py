"""The controller scripts' client finds a live run or says in one sentence why not, soon: a
directory that never appears, or a run that has already ended."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from controller.client import Northbound, NorthboundError

from ..conftest import ROOT


def test_a_missing_run_directory_is_refused_after_a_short_wait(tmp_path):
    started = time.monotonic()
    with pytest.raises(NorthboundError, match="is not a run directory"):
        Northbound.for_run(tmp_path / "nothing", appear_s=0.3)
    assert time.monotonic() - started < 5


def test_an_ended_run_is_refused_at_once(tmp_path):
    (tmp_path / "results.json").write_text("{}")
    with pytest.raises(NorthboundError, match="has ended"):
        Northbound.for_run(tmp_path)


def test_the_example_scripts_exit_2_with_one_sentence(tmp_path):
    (tmp_path / "results.json").write_text("{}")
    for script in ("sweep_reconfig_delay.py", "custom_wavelength_policy.py"):
        done = subprocess.run([sys.executable, str(ROOT / "examples" / script), str(tmp_path)], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 2 and done.stderr.startswith("error: the run in") and "Traceback" not in done.stderr

"""`testbed compare`: one workload on four fabrics at 1,024 GPUs in one command, against the closed
form where there is one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..conftest import ROOT


def test_four_fabrics_at_1024_gpus_in_one_command(tmp_path):
    names = ("quickstart", "cluster-allreduce", "ocs-allreduce", "ring-allreduce")
    done = subprocess.run([sys.executable, "-m", "testbed", "compare",
                           *(str(ROOT / "scenarios" / f"{name}.yaml") for name in names),
                           "--set", "fabric.hosts=1024", "--json", "--plot", str(tmp_path / "compare.png")],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["fabric"] for r in rows] == ["elect-flat", "elect-cluster", "sip-ocs", "sip-ring"]
    assert all(r["hosts"] == 1024 for r in rows)
    # Ring all-reduce of 100 MB at 100 Gb/s, alpha 5 us, n = 1024: 2(n-1)·alpha + 2(n-1)/n·M/B.
    n = 1024
    assert rows[0]["predicted_iteration_time_s"] == pytest.approx(2 * (n - 1) * 5e-6 + 2 * (n - 1) / n * 8e8 / 1e11)
    assert all(r["predicted_iteration_time_s"] >= rows[0]["predicted_iteration_time_s"] * (1 - 1e-9) for r in rows)
    assert (tmp_path / "compare.png").stat().st_size > 10_000


def test_compare_refuses_several_values_for_one_field():
    done = subprocess.run([sys.executable, "-m", "testbed", "compare", str(ROOT / "scenarios" / "quickstart.yaml"),
                           "--set", "fabric.hosts=8,16"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "testbed sweep" in done.stderr

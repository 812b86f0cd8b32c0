"""The runner's orchestration tests pass as an unprivileged user: the loopback fabric needs no root
(the unit tests run as whoever runs the suite, which in CI is root)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ..conftest import ROOT

pytestmark = pytest.mark.root


def test_the_loopback_runner_tests_pass_as_nobody():
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root to switch to an unprivileged user")
    nobody = pwd.getpwnam("nobody")
    readable = subprocess.run(["runuser", "-u", "nobody", "--", "test", "-x", sys.executable, "-a", "-r",
                               str(ROOT / "tests" / "unit" / "test_runner_loopback.py")], timeout=30)
    if readable.returncode != 0:  # e.g. a clone inside a directory only root may enter (mktemp -d)
        pytest.skip(f"user nobody cannot read this checkout ({ROOT}) or run {sys.executable}")
    home = Path(tempfile.mkdtemp(prefix="testbed-nobody-"))  # pytest's own tmp_path is root's alone
    try:
        os.chown(home, nobody.pw_uid, nobody.pw_gid)
        out = subprocess.run(
            ["runuser", "-u", "nobody", "--", "env", f"HOME={home}", "PYTHONDONTWRITEBYTECODE=1", sys.executable,
             "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={home / 'base'}",
             "tests/unit/test_runner_loopback.py"],
            cwd=ROOT, capture_output=True, text=True, timeout=600)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and " skipped" not in out.stdout, out.stdout[-3000:]

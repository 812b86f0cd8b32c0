"""Every command the README shows is one the tool accepts, names files that exist, and (where it
needs no root) runs as written; the root suite runs the rest (tests/integration/test_readme_runs.py)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from testbed.interface.cli import build_parser

from ..conftest import ROOT
from ..readme_commands import readme_commands

COMMANDS = readme_commands()


def test_the_readme_shows_its_command_blocks():
    lines = [c.line for c in COMMANDS]
    assert lines[:2] == ["bash scripts/setup.sh run", "bash scripts/setup.sh test"]  # its first lines
    assert any("examples/sweep_reconfig_delay.py" in line for line in lines)
    assert any("--hold" in line for line in lines)


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.words[0] == "testbed"], ids=lambda c: c.line)
def test_testbed_commands_parse_and_name_files_that_exist(command):
    args = build_parser().parse_args(command.words[1:])
    if hasattr(args, "scenario"):
        assert (ROOT / args.scenario).is_file(), f"{command.line}: no {args.scenario}"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.words[0] == "bash"], ids=lambda c: c.line)
def test_setup_script_takes_the_actions_the_readme_gives(command):
    script, action = command.words[1], command.words[2]
    text = (ROOT / script).read_text()
    assert f"\n  {action})" in text, f"{script} has no '{action}' action"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.words[0] == "python3"], ids=lambda c: c.line)
def test_example_scripts_run_with_the_systems_python3_outside_the_environment(command):
    # As a new shell would: no virtual environment on the PATH, the distribution's python3.
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ.get("HOME", "/")}
    python3 = shutil.which("python3", path=env["PATH"])
    out = subprocess.run([python3, command.words[1], "--help"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "run_dir" in out.stdout

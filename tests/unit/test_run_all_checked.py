"""Host set-up commands batched into few shell round trips: each command's status and output are
told apart, the first failure is named with what it said, and no line outgrows a terminal's."""

from __future__ import annotations

import subprocess

import pytest

from testbed.emulation.fabric import MAX_LINE_BYTES, run_all_checked
from testbed.model.errors import RunFailed


class ShellNode:
    """A stand-in for a Mininet node: each cmd() is one bash round trip, as over the node's pty."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def cmd(self, line: str) -> str:
        self.lines.append(line)
        return subprocess.run(["bash", "-c", line], capture_output=True, text=True).stdout


def test_commands_run_in_one_round_trip_and_succeed():
    node = ShellNode()
    run_all_checked(node, ["true", "echo hello", "printf 'a\\nb\\n'"], "configuring h1")
    assert len(node.lines) == 1


def test_the_first_failure_is_named_with_its_own_output():
    node = ShellNode()
    with pytest.raises(RunFailed, match=r"configuring h1 failed: `echo oops; exit_with_3` said oops\n.*"
                                        r"\(exit status 127\)"):
        run_all_checked(node, ["echo fine", "echo oops; exit_with_3", "echo later"], "configuring h1")
    with pytest.raises(RunFailed, match=r"`sh -c 'echo no >&2; exit 3'` said no \(exit status 3\)"):
        run_all_checked(node, ["echo fine", "sh -c 'echo no >&2; exit 3'"], "configuring h1")


def test_long_command_lists_are_split_below_a_terminal_line():
    node = ShellNode()
    commands = [f"echo {'x' * 200} >/dev/null" for _ in range(40)]
    run_all_checked(node, commands, "configuring h1")
    assert len(node.lines) > 1 and all(len(line) <= MAX_LINE_BYTES for line in node.lines)

"""The host-configuration timer's own logic, without hosts: batching per tool, the order hosts get a
restore, the learned early start, and the protocol over fake shells that record what they were given."""

from __future__ import annotations

import io
import json
import time

import pytest

from controller import retune_timer


def test_lines_go_to_their_tool_without_the_tool_name():
    lines = ["tc class replace dev h1-eth0 classid 1:3 htb rate 1bit", "ip route replace 10.0.0.2/32 dev h1-eth0"]
    assert retune_timer.split_by_tool(lines) == {"tc": "class replace dev h1-eth0 classid 1:3 htb rate 1bit\n",
                                                "ip": "route replace 10.0.0.2/32 dev h1-eth0\n"}
    assert retune_timer.split_by_tool([]) == {}


def test_a_restore_reaches_first_the_hosts_that_did_nothing_in_the_dark_then_by_when_they_applied_it():
    # Hosts 0 and 3 applied the dark 0.9 ms and 0.2 ms after it began; 1 and 2 had nothing to do.
    assert retune_timer.write_order([0, 1, 2, 3], {0: 0.9e-3, 3: 0.2e-3}) == [1, 2, 3, 0]
    assert retune_timer.write_order([2, 0, 1], {}) == [0, 1, 2]


def test_a_step_begins_early_by_half_its_expected_spread():
    latency = retune_timer.Latency(history=3)
    assert latency.early_s(10) == 0.0  # nothing learned yet
    latency.learn(10, 1e-3)  # 0.1 ms per shell
    latency.learn(20, 4e-3)  # 0.2 ms per shell
    latency.learn(4, 0.2e-3)  # 0.05 ms per shell
    assert latency.early_s(10) == pytest.approx(10 * 0.1e-3 / 2)  # the median, 0.1 ms, over half of 10 shells
    latency.learn(0, 1.0)  # a step that wrote nothing teaches nothing
    assert latency.early_s(10) == pytest.approx(0.5e-3)


class FakeShells:
    def __init__(self) -> None:
        self.applied: list[tuple[float, list[int]]] = []

    def apply(self, lines):
        now = time.monotonic()
        self.applied.append((now, list(lines)))
        return {rank: now + 1e-4 * i for i, rank in enumerate(lines)}


def test_a_restore_keeps_its_distance_from_the_dark_instant():
    shells, replies = FakeShells(), io.StringIO()
    dark_at = time.monotonic() + 0.01
    request = {"steps": [{"id": 1, "phase": "dark", "at_s": dark_at, "lines": {"0": ["ip route replace x"]}},
                         {"id": 1, "phase": "restore", "after_s": 0.02, "lines": {"1": ["tc class replace y"],
                                                                                  "0": ["ip route replace z"]}}]}
    retune_timer.serve(shells, [json.dumps(request)], replies)
    dark, restore = [json.loads(line) for line in replies.getvalue().splitlines()]
    assert dark["at_s"] == pytest.approx(dark_at)
    assert restore["at_s"] == pytest.approx(dark_at + 0.02)  # from the agreed instant, not from a late start
    assert shells.applied[0][0] >= dark_at - dark["early_s"] and shells.applied[1][1] == [1, 0]
    assert set(restore["done_s"]) == {"0", "1"}

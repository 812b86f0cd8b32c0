"""A long prediction says how far it has got to whoever listens (the command line's bar), in shares
of the whole work that nested parts (retune rule, controller delay, iteration) divide."""

from __future__ import annotations

import pytest

from testbed.core import progress
from testbed.model.schedule import Schedule
from testbed.oracle.retune_threshold import with_retune_threshold

from .test_replanning_sim import phased, ring


def test_nested_parts_scale_into_the_whole_by_hand():
    """A half-done report in the second half of a part that starts at 0.2 and spans 0.5:
    0.2 + 0.5·(0.5 + 0.5·0.5) = 0.575."""
    heard: list[tuple[str, float]] = []
    with progress.reporting(lambda what, done: heard.append((what, done))):
        with progress.part(0.2, 0.5, "rule 1: "), progress.part(0.5, 0.5, "delay 2: "):
            progress.report("steps", 0.5)
            progress.report("steps", 7.0)  # clamped to the part's end
    # each part says so as it begins: "rule 1" at 0.2, "rule 1: delay 2" at 0.45
    assert heard[0] == ("rule 1", pytest.approx(0.2)) and heard[1] == ("rule 1: delay 2", pytest.approx(0.45))
    assert heard[2] == ("rule 1: delay 2: steps", pytest.approx(0.575))
    assert heard[3][1] == pytest.approx(0.7)


def test_nobody_listening_costs_nothing_and_says_nothing():
    assert not progress.active()
    progress.report("steps", 0.5)  # no hook: nothing happens


def test_the_retune_search_reports_its_rules_and_delays_within_the_whole(monkeypatch):
    """A re-planning schedule's search over retune rules: every report within 0-1, naming the rule
    and the controller delay it simulates."""
    import testbed.oracle.schedule_sim as sim

    monkeypatch.setattr(sim, "PROGRESS_ROUNDS", 16)
    schedule = Schedule.from_json(phased([([(0, 1), (2, 3)], 4_000_000, 20.0), ([(0, 2), (1, 3)], 4_000_000, 20.0)]))
    heard: list[tuple[str, float]] = []
    with progress.reporting(lambda what, done: heard.append((what, done))):
        with_retune_threshold(schedule, ring(4, 4, reconfig_us=25.0, period_us=100.0))
    assert heard and all(0.0 <= done <= 1.0 for _, done in heard)
    assert any(what.startswith("standing still: ") for what, _ in heard)
    assert any(what.startswith("retune rule 1/") and "delay 1/5" in what for what, _ in heard)


def test_a_long_prediction_into_a_pipe_says_how_far_it_has_got(monkeypatch, capsys):
    """Where stderr is no terminal (a log, a pipe), `check` and `predict` say in plain lines how
    far a long prediction has got (here at once: the wait is set to nothing); --json stays quiet."""
    from testbed.interface import cli

    from ..conftest import ROOT

    monkeypatch.setattr(cli, "PLAIN_PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(cli, "PLAIN_PROGRESS_EVERY_S", 0.0)
    scenario = str(ROOT / "scenarios" / "placed-resnet-ring.yaml")
    for command in ("check", "predict"):
        assert cli.main([command, scenario]) == 0
        err = capsys.readouterr().err
        assert "predicting: " in err and "% done after" in err, command
    assert cli.main(["predict", scenario, "--json"]) == 0
    assert "predicting" not in capsys.readouterr().err

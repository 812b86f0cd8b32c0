"""A run directory is written whole: signals that arrive meanwhile are held and raised after it."""

from __future__ import annotations

import os
import signal

import pytest

from testbed.emulation.live import RunInterrupted, SignalGuard


def test_ctrl_c_while_writing_is_raised_after_the_block_completes():
    # Whatever handled SIGINT before comes back: Python's default, or SIG_IGN when the suite was
    # started in the background by a shell without job control.
    before = signal.getsignal(signal.SIGINT)
    written = []
    with pytest.raises(KeyboardInterrupt):
        with SignalGuard(hold=True):
            os.kill(os.getpid(), signal.SIGINT)
            written.append("results.json")
    assert written == ["results.json"]
    assert signal.getsignal(signal.SIGINT) is before


def test_sigterm_while_writing_is_raised_as_an_interrupted_run():
    with pytest.raises(RunInterrupted, match="SIGTERM"):
        with SignalGuard(hold=True):
            os.kill(os.getpid(), signal.SIGTERM)


def test_nothing_is_raised_when_no_signal_arrives():
    with SignalGuard(hold=True):
        pass

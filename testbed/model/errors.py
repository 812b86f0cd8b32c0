"""Typed exceptions: bad input (exit 2) and failed runs (exit 1)."""


class TestbedError(Exception):
    """Base class; the message is one sentence meant for the user."""

    exit_code = 1


class InputError(TestbedError):
    """The user's input is wrong: a scenario, a file path, a flag. Exit code 2."""

    exit_code = 2


class EnvironmentProblem(TestbedError):
    """The machine lacks something the command needs (root, Open vSwitch, Mininet)."""

    exit_code = 1


class RunFailed(TestbedError):
    """An emulation run started but did not complete correctly."""

    exit_code = 1

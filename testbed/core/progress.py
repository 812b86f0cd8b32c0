"""How far a long prediction has got, for whoever shows it: a hook the command line sets while it
predicts, silent where none is set (tests, the API, `--json`). Nested parts of the work (a retune
rule, a controller delay, an iteration) each take a share of the whole and a label."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Report = Callable[[str, float], None]  # (what is being simulated, share of the whole work done, 0-1)

_HOOK: ContextVar[Report | None] = ContextVar("prediction_progress", default=None)
_SCOPE: ContextVar[tuple[float, float, str]] = ContextVar("prediction_part", default=(0.0, 1.0, ""))


@contextmanager
def reporting(hook: Report) -> Iterator[None]:
    """Send progress to `hook` while the block predicts."""
    token = _HOOK.set(hook)
    try:
        yield
    finally:
        _HOOK.reset(token)


@contextmanager
def part(start: float, width: float, label: str) -> Iterator[None]:
    """A part of the enclosing work, from `start` for `width` of it (shares of 1), named `label`."""
    outer_start, outer_width, outer_label = _SCOPE.get()
    scope = (outer_start + outer_width * start, outer_width * width, f"{outer_label}{label}")
    token = _SCOPE.set(scope)
    hook = _HOOK.get()
    if hook is not None:
        hook(scope[2].rstrip(":, "), scope[0])
    try:
        yield
    finally:
        _SCOPE.reset(token)


def active() -> bool:
    return _HOOK.get() is not None


def report(what: str, done: float) -> None:
    """`done` (0-1) of the innermost part, described by `what` after the parts' labels."""
    hook = _HOOK.get()
    if hook is None:
        return
    start, width, label = _SCOPE.get()
    hook(f"{label}{what}", start + width * min(1.0, max(0.0, done)))

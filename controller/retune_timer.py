"""The host-configuration timer: a process of its own that applies `ip`/`tc` changes inside every
host at agreed instants and reports when each host's change took effect.

Dark times are timed here, not in the os-ken process: there, threads share one interpreter lock
with traffic estimation and re-planning, and a restore could start hundreds of milliseconds late
under load. This process does nothing but wait for instants, at real-time priority, and its `ip`
and `tc` shells (one pair per host, in the host's network namespace) inherit that priority.

Protocol, one JSON object per line. In on stdin: `{"steps": [{"id": 3, "phase": "dark", "at_s": T,
"lines": {"0": ["tc class replace ...", "ip route replace ..."]}}, ...]}`, where T is CLOCK_MONOTONIC
seconds (shared by every namespace) and 0 means now; `"after_s": D` instead means D seconds after
the previous step's agreed instant (a restore keeps its distance from the dark start however late
that was). The steps of one line arrive together, so a restore never waits on the controller.
Out on stdout: `{"id": 3, "phase": "dark", "at_s": T, "early_s": ..., "begun_s": ..., "done_s":
{"0": ...}}`, where `at_s` is the agreed instant (the requested one, or when the step began if
that was later), and a host's time is when its shells had applied every line (a marker command
behind them answered), or `{"error": "..."}`.
Run as `python -m controller.retune_timer LOG_DIR PID [PID ...]`; exits when stdin closes.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path

SPIN_S = 1e-3  # the last millisecond before an instant is spun: sleeps overshoot by ~50-80 µs
PR_SET_TIMERSLACK = 29
REALTIME_PRIORITY = 10
MARKER_TIMEOUT_S = 10.0
# A command behind the change whose one line of output says the lines before it were applied
# (the shells run their input in order and answer each netlink request before the next).
MARKERS = {"tc": ("qdisc show dev lo\n", "qdisc"), "ip": ("link show dev lo\n", "lo:")}
TOOLS = ("tc", "ip")


def _realtime() -> None:
    """Wake at the instant even with both cores busy: real-time priority and 1 ns timer slack."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
    except (OSError, AttributeError):
        pass  # not permitted: the dark-time monitor reports the looser timing
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def sleep_until(deadline_s: float) -> None:
    while True:
        left = deadline_s - time.monotonic()
        if left <= 0:
            return
        if left > SPIN_S:
            time.sleep(left - SPIN_S)


def split_by_tool(lines: list[str]) -> dict[str, str]:
    """Batch input per tool: `tc class ...` goes to the tc shell as `class ...`."""
    text = {tool: "".join(line.split(" ", 1)[1] + "\n" for line in lines if line.startswith(tool + " "))
            for tool in TOOLS}
    return {tool: t for tool, t in text.items() if t}


class Shells:
    """A `tc -batch -` and an `ip -o -batch -` per host, output line-buffered so markers come back
    as soon as they are answered; errors go to one log per host and tool, which the run checks."""

    def __init__(self, pids: list[int], log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.procs: dict[tuple[int, str], subprocess.Popen] = {}
        self.selector = selectors.DefaultSelector()
        for rank, pid in enumerate(pids):
            for tool in TOOLS:
                err = open(log_dir / f"h{rank}.{tool}.err", "ab")
                options = ["-o"] if tool == "ip" else []
                proc = subprocess.Popen(
                    ["nsenter", f"--net=/proc/{pid}/ns/net", "stdbuf", "-oL", tool, *options, "-force", "-batch", "-"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, bufsize=0)
                err.close()
                self.procs[(rank, tool)] = proc
                assert proc.stdout is not None and proc.stdin is not None  # both are pipes
                self.selector.register(proc.stdout, selectors.EVENT_READ, (rank, tool))
        self.pending = {key: b"" for key in self.procs}

    def warm_up(self) -> tuple[int, float]:
        """A marker through every shell before the first change: a shell's first command costs
        milliseconds (loading, page faults), which would land inside a dark time. Then a second,
        as a step writes them: returns how many shells answered and how long the last one took,
        for the first change to begin early by what it will likely cost."""
        ranks = sorted({rank for rank, _ in self.procs})
        self.apply({rank: [] for rank in ranks}, every_tool=True)
        begun = time.monotonic()
        done = self.apply({rank: [] for rank in ranks}, every_tool=True)
        return len(self.procs), max(done.values(), default=begun) - begun

    def apply(self, lines: dict[int, list[str]], every_tool: bool = False) -> dict[int, float]:
        """Write every host's lines and a marker behind them; returns when each host's markers came back."""
        waiting: dict[tuple[int, str], str] = {}
        for rank, host_lines in lines.items():
            batches = split_by_tool(host_lines)
            for tool, text in ({tool: batches.get(tool, "") for tool in TOOLS} if every_tool else batches).items():
                proc = self.procs[(rank, tool)]
                if proc.poll() is not None:
                    raise RuntimeError(f"the {tool} shell of host {rank} exited")
                command, answer = MARKERS[tool]
                assert proc.stdin is not None
                proc.stdin.write((text + command).encode())
                waiting[(rank, tool)] = answer
        done: dict[int, float] = {}
        deadline = time.monotonic() + MARKER_TIMEOUT_S
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                rank, tool = next(iter(waiting))
                raise RuntimeError(f"the {tool} shell of host {rank} did not answer within {MARKER_TIMEOUT_S:.0f} s")
            for key, _ in self.selector.select(left):
                rank, tool = key.data
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    raise RuntimeError(f"the {tool} shell of host {rank} exited")
                now = time.monotonic()
                self.pending[(rank, tool)] += chunk
                *complete, self.pending[(rank, tool)] = self.pending[(rank, tool)].split(b"\n")
                expected = waiting.get((rank, tool))
                if expected is not None and any(expected in line.decode(errors="replace") for line in complete):
                    del waiting[(rank, tool)]
                    if not any(r == rank for r, _ in waiting):
                        done[rank] = now
        return done

    def close(self) -> None:
        for proc in self.procs.values():
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()


def write_order(ranks, previous_offsets: dict[int, float]) -> list[int]:
    """The order to give hosts their lines in a step that follows another: a host's links are dark
    from when it applied the first step to when it applied this one, and the shells answer in about
    the order they were written to. So hosts that had nothing in the first step (dark since its
    instant) go first, then the rest in the order they applied it: each host's delays then cancel."""
    return sorted(ranks, key=lambda r: (r in previous_offsets, previous_offsets.get(r, 0.0), r))


class Latency:
    """What it costs the shells to apply a step, learned from the last steps: one shell's share of
    the time until the last host answered (they share the cores, so a step's hosts finish one after
    another). A step begins early by half its expected spread, so its hosts switch over around the
    agreed instant instead of all after it."""

    def __init__(self, history: int = 15) -> None:
        self.history = history
        self.per_shell_s: list[float] = []

    def learn(self, shells: int, spread_s: float) -> None:
        if shells:
            self.per_shell_s = (self.per_shell_s + [spread_s / shells])[-self.history:]

    def early_s(self, shells: int) -> float:
        recent = sorted(self.per_shell_s)
        return recent[len(recent) // 2] * shells / 2 if recent else 0.0


def shell_count(lines: dict[int, list[str]]) -> int:
    return sum(len(split_by_tool(host_lines)) for host_lines in lines.values())


def serve(shells: Shells, requests, replies, latency: Latency | None = None) -> None:
    """Apply each step around its agreed instant: `at_s`, or `after_s` past the previous step's
    agreed instant (never past when it began: the gap between two steps is what is timed)."""
    last_at, latency = 0.0, latency or Latency()
    offsets: dict[int, float] = {}
    for raw in requests:
        if not raw.strip():
            continue
        for step in json.loads(raw)["steps"]:
            follows = "after_s" in step
            at_s = last_at + float(step["after_s"]) if follows else float(step.get("at_s", 0.0))
            lines = {int(rank): host_lines for rank, host_lines in step["lines"].items()}
            ordered = {r: lines[r] for r in write_order(lines, offsets if follows else {})}
            count = shell_count(ordered)
            early = latency.early_s(count)
            if follows:  # at most a quarter of the gap: a slow moment must not cut a dark time short
                early = min(early, 0.25 * float(step["after_s"]))
            sleep_until(at_s - early)
            begun = time.monotonic()
            last_at = max(at_s, begun) if at_s else begun
            done = shells.apply(ordered)
            offsets = {r: t - begun for r, t in done.items()}
            latency.learn(count, max(offsets.values(), default=0.0))
            replies.write(json.dumps({"id": step.get("id"), "phase": step.get("phase"), "at_s": last_at,
                                      "early_s": early, "begun_s": begun,
                                      "done_s": {str(r): t for r, t in done.items()}}) + "\n")
            replies.flush()


def main(argv: list[str]) -> int:
    _realtime()
    log_dir, pids = Path(argv[0]), [int(p) for p in argv[1:]]
    shells = Shells(pids, log_dir)
    try:
        latency = Latency()
        latency.learn(*shells.warm_up())
        # Nothing here builds cycles worth collecting, and a collection must not land on an instant.
        gc.collect()
        gc.freeze()
        gc.disable()
        serve(shells, sys.stdin, sys.stdout, latency)
    except Exception as error:  # the controller reads this and stops: host state is unknown
        sys.stdout.write(json.dumps({"error": f"{type(error).__name__}: {error}"}) + "\n")
        sys.stdout.flush()
        return 3
    finally:
        shells.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

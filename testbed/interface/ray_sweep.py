"""Sweeps on a Ray cluster: an emulated point needs a machine's `testbed` resource (Mininet and Open
vSwitch allow one emulation per kernel), a predicted point one CPU; each point runs in a temporary
directory on its machine and its run directory (less packet captures) comes back under the driver's
sweep directory, so resuming and the table work as for a sweep on one machine."""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import socket
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from testbed.interface.sweep import OpenSweep, SweepPoint, predict_point
from testbed.model.errors import EnvironmentProblem
from testbed.model.scenario import Scenario

EMULATION_RESOURCE = "testbed"
POINT_FILE = "sweep_point.json"  # where and when a point ran
LEFT_BEHIND = ("*.pcap", "*.pcap.*")  # packet captures stay on the machine that ran the point
CANCEL_WAIT_S = 120.0  # for cancelled emulations to clean up and say what they completed
LOCAL_OBJECT_STORE_BYTES = 256 * 2**20  # run directories are small; keep Ray's shared memory small
# Points wait while no machine offers what they need (a lost machine may be restarting); after
# this long they are left for the next run of the sweep.
NO_MACHINE_WAIT_S = 60.0


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EnvironmentProblem("--ray needs Ray, an optional extra: .venv/bin/pip install -e '.[cluster]' "
                                 "(on every machine of the cluster)") from None
    return ray


def connect(address: str, can_emulate: bool) -> Any:
    """Joins the Ray cluster at `address`, or starts one on this machine for `local` (with the
    `testbed` resource if this machine can emulate). Returns the ray module."""
    ray = _ray()
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                               "logging_level": logging.ERROR, "configure_logging": True}
    try:
        if address == "local":
            ray.init(resources={EMULATION_RESOURCE: 1} if can_emulate else {}, num_cpus=os.cpu_count(),
                     object_store_memory=LOCAL_OBJECT_STORE_BYTES, **options)
        else:
            ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise EnvironmentProblem(f"--ray {address}: could not join a Ray cluster there ({error}); start one "
                                 f"with `ray start --head` and give its address, or use --ray local") from None
    return ray


def node_label() -> str:
    return f"{socket.gethostname()} ({_ray().util.get_node_ip_address()})"


def pack(run_dir: Path) -> bytes:
    """The run directory as a gzipped tar, packet captures left out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(run_dir.rglob("*")):
            if path.is_file() and not any(path.match(pattern) for pattern in LEFT_BEHIND):
                tar.add(path, arcname=str(path.relative_to(run_dir)), recursive=False)
    return buffer.getvalue()


def unpack(data: bytes, run_dir: Path) -> None:
    if run_dir.exists():
        shutil.rmtree(run_dir)  # what an earlier, unfinished attempt left
    run_dir.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()
        for member in members:  # pack() wrote plain files under relative names; anything else is refused
            if not member.isfile() or member.name.startswith("/") or ".." in Path(member.name).parts:
                raise EnvironmentProblem(f"a point's run directory came back with {member.name!r}, which is "
                                         f"not a file inside it; the worker runs another testbed version?")
        tar.extractall(run_dir, members=members)


def run_point(scenario: Scenario, point_id: str, predict_only: bool) -> Iterator[Any]:
    """The body of a point's Ray task: first says which machine it runs on (so a lost machine can be
    named), then runs the point and yields (results, packed run directory); the run directory gains
    `sweep_point.json`: the machine, the worker's process and when the point started and ended there."""
    node = node_label()
    yield node
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="testbed-point-") as work:
        run_dir = Path(work) / point_id
        if predict_only:
            result = predict_point(scenario, run_dir)
        else:
            from testbed.emulation.run import Runner
            from testbed.planning.plan import prepare

            result = Runner(prepare(scenario), run_dir).execute()
        where = {"node": node, "pid": os.getpid(), "started_unix_s": started, "finished_unix_s": time.time()}
        (run_dir / POINT_FILE).write_text(json.dumps(where, indent=1) + "\n")
        yield result, pack(run_dir)


class _Flight:
    """One point in flight: its Ray generator and, once it said so, the machine running it."""

    def __init__(self, point: SweepPoint, generator: Any) -> None:
        self.point, self.generator, self.node = point, generator, None


def run_on_ray(ray: Any, sweep: OpenSweep, predict_only: bool,
               on_point: Callable[[SweepPoint, str], None], poll_s: float = 0.5) -> dict[str, Any]:
    """Runs the sweep's pending points on the cluster, all submitted at once; Ray starts an
    emulated point when a machine's `testbed` resource is free. Ctrl-C cancels what is in flight
    (a running emulation cleans up) and leaves the sweep resumable: cancelled points run again."""
    if not predict_only and ray.cluster_resources().get(EMULATION_RESOURCE, 0) < 1:
        raise EnvironmentProblem(
            f"no machine of the Ray cluster offers the `{EMULATION_RESOURCE}` resource, so no emulated point "
            f"can run: on each machine, after `bash scripts/setup.sh`, as root, `ray start --address=HEAD:6379 "
            f"--resources='{{\"{EMULATION_RESOURCE}\": 1}}'` (or use --predict-only)")
    task = ray.remote(run_point)
    options: dict[str, Any] = {"max_retries": 0, "num_cpus": 1}
    if not predict_only:
        options["resources"] = {EMULATION_RESOURCE: 1}
    flights = [_Flight(point, task.options(**options).remote(scenario, point.id, predict_only))
               for point, scenario in sweep.pending]
    counts: dict[str, Any] = {"ran": 0, "skipped": sweep.skipped, "failed": 0, "interrupted": False, "lost": [],
                              "stranded": []}
    needed = "CPU" if predict_only else EMULATION_RESOURCE
    missing_since: float | None = None
    try:
        while flights:
            ready, _ = ray.wait([f.generator for f in flights], num_returns=1, timeout=poll_s)
            for flight in [f for f in flights if any(f.generator is r for r in ready)]:
                if _advance(ray, flight, sweep, counts, on_point):
                    flights.remove(flight)
            if ready or not flights:
                continue
            if ray.cluster_resources().get(needed, 0) >= 1:
                missing_since = None
            elif missing_since is None:
                missing_since = time.monotonic()
            elif time.monotonic() - missing_since > NO_MACHINE_WAIT_S:
                counts["stranded"] = [f.point.id for f in flights]
                raise KeyboardInterrupt  # stop as Ctrl-C would: cancel, keep what came back
    except KeyboardInterrupt:
        counts["interrupted"] = True
        _cancel(ray, flights, sweep, counts, on_point)
    sweep.write_table()
    return counts


def _advance(ray: Any, flight: _Flight, sweep: OpenSweep, counts: dict[str, Any],
             on_point: Callable[[SweepPoint, str], None]) -> bool:
    """Takes the flight's next output; True once the point is over (finished, failed, cancelled or lost)."""
    try:
        output = ray.get(next(flight.generator))
    except StopIteration:
        return _lost(flight, sweep, counts, on_point, "it ended without results")
    except ray.exceptions.TaskCancelledError:  # cancelled before it started: nothing to keep
        on_point(flight.point, "interrupted")
        return True
    except ray.exceptions.RayTaskError as error:  # the point's own code raised
        _write_failure(sweep, flight.point, f"the point raised {error.cause!r}")
        _record(sweep, flight.point, "failed", counts, on_point)
        return True
    except ray.exceptions.RayError as error:  # the machine or its worker went away
        return _lost(flight, sweep, counts, on_point, type(error).__name__)
    if flight.node is None:
        flight.node = output
        return False
    result, packed = output
    unpack(packed, sweep.run_dir(flight.point))
    _record(sweep, flight.point, result.get("status", "failed"), counts, on_point)
    return True


def _lost(flight: _Flight, sweep: OpenSweep, counts: dict[str, Any],
          on_point: Callable[[SweepPoint, str], None], why: str) -> bool:
    node = flight.node or "a machine not yet known"
    _write_failure(sweep, flight.point, f"the machine running it, {node}, was lost mid-point ({why}); rerun "
                                        f"the sweep to run this point again", lost_node=node)
    counts["lost"].append(flight.point.id)
    _record(sweep, flight.point, "failed", counts, on_point)
    return True


def _write_failure(sweep: OpenSweep, point: SweepPoint, error: str, **extra: Any) -> None:
    """results.json for a point that brought back no run directory of its own."""
    run_dir = sweep.run_dir(point)
    run_dir.mkdir(parents=True, exist_ok=True)
    result = {"name": point.id, "status": "failed", "error": error, "iteration_times_s": [],
              "emulated_over_predicted": [], **extra}
    (run_dir / "results.json").write_text(json.dumps(result, indent=1) + "\n")


def _record(sweep: OpenSweep, point: SweepPoint, status: str, counts: dict[str, Any],
            on_point: Callable[[SweepPoint, str], None]) -> None:
    counts["ran"] += 1
    counts["failed"] += status == "failed"
    sweep.record(point)
    on_point(point, status)


def _cancel(ray: Any, flights: list[_Flight], sweep: OpenSweep, counts: dict[str, Any],
            on_point: Callable[[SweepPoint, str], None]) -> None:
    """Cancels the points in flight: a running emulation gets KeyboardInterrupt and cleans up;
    what comes back is kept (an interrupted point runs again on resume)."""
    for flight in flights:
        ray.cancel(flight.generator)
    deadline = time.monotonic() + CANCEL_WAIT_S
    while flights and time.monotonic() < deadline:
        ready, _ = ray.wait([f.generator for f in flights], num_returns=1, timeout=1.0)
        for flight in [f for f in flights if any(f.generator is r for r in ready)]:
            try:
                if not _advance(ray, flight, sweep, counts, on_point):
                    continue
            except KeyboardInterrupt:
                return
            flights.remove(flight)

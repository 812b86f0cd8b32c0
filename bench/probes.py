"""Live optical fabrics for tests and benches: a fabric brought up with a given traffic matrix, and
UDP probe streams that show which path packets take (by TTL) and how long a link stays dark."""

from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from controller.client import Northbound
from testbed.core.calibration import load_calibration
from testbed.emulation.live import LiveFabric, live_fabric
from testbed.model.errors import RunFailed
from testbed.model.fabric_section import FabricSection

PROBE_PORT = 7001
# The receiver listens until the sender is done: up to this long past the stream's duration, for
# a sender that starts late (its interpreter took 1.5-4 s to start inside the software-emulated VM).
RECEIVER_SPARE_S = 60.0
IN_FLIGHT_S = 0.2
HOST_TTL = 64


@contextmanager
def optical_fabric(fabric: FabricSection, host_rate_bps: float, work_dir: Path, traffic: list[list[float]],
                   dilation: float = 1.0, policy: str = "one-shot",
                   slowness: float | None = None) -> Iterator[tuple[LiveFabric, Northbound]]:
    """A live sip-ocs or sip-ring fabric planned for `traffic` (N×N bytes), with its API client;
    its waits for the switches stretch by `slowness` (the stored calibration's when not given)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    schedule = work_dir / "schedule.json"
    schedule.write_text(json.dumps({"hosts": fabric.hosts, "traffic_matrix_bytes": traffic, "gpus": []}))
    extra = {"dilation": dilation, "schedule": str(schedule.resolve()),
             "events": str((work_dir / "controller_events.jsonl").resolve())}
    slowness = load_calibration().slowness if slowness is None else slowness
    with live_fabric(fabric, host_rate_bps, work_dir, extra, slowness) as live:
        assert live.ready is not None and live.ready.api is not None, "a reconfigurable fabric serves its API"
        api = Northbound(live.ready.api)
        api.settings(policy=policy)
        yield live, api


@dataclass(frozen=True)
class ProbeResult:
    arrivals: list[dict]  # seq, sent, arrived (monotonic s), ttl
    sent: int

    @property
    def hops(self) -> list[int]:
        """Hops of each arrival: 1 is direct, 2 relayed once, ..."""
        return [HOST_TTL - a["ttl"] + 1 for a in self.arrivals]

    def largest_gap(self) -> tuple[float, float, float]:
        """(gap, last arrival before it, first arrival after it) in monotonic seconds."""
        times = sorted(a["arrived"] for a in self.arrivals)
        best = (0.0, 0.0, 0.0)
        for before, after in zip(times, times[1:]):
            if after - before > best[0]:
                best = (after - before, before, after)
        return best

    def first_with_hops(self, hops: int, after_s: float = 0.0) -> dict | None:
        return next((a for a in sorted(self.arrivals, key=lambda a: a["arrived"])
                     if a["arrived"] >= after_s and HOST_TTL - a["ttl"] + 1 == hops), None)


def probe(live: LiveFabric, src: int, dst: int, work_dir: Path, duration_s: float = 1.0,
          interval_s: float = 5e-4, during: Callable[[], None] | None = None, during_at_s: float = 0.3) -> ProbeResult:
    """Stream probes from GPU src to GPU dst for duration_s; call `during` that far into the stream."""
    out = work_dir / f"probe-{src}-{dst}-{time.monotonic_ns()}.jsonl"
    receiver = live.fabric.host(dst).popen([sys.executable, "-m", "hosts.probe", "recv", str(PROBE_PORT),
                                            "--duration-s", str(duration_s + RECEIVER_SPARE_S), "--out", str(out)])
    deadline = time.monotonic() + 10
    while not (out.exists() and out.read_text().strip()):
        if time.monotonic() > deadline or receiver.poll() is not None:
            receiver.kill()
            raise RunFailed(f"the probe receiver in h{dst + 1} did not start")
        time.sleep(0.01)
    dst_ip = live.fabric.topology.hosts[dst].ip
    sender = live.fabric.host(src).popen([sys.executable, "-m", "hosts.probe", "send", dst_ip, str(PROBE_PORT),
                                          "--interval-s", str(interval_s), "--duration-s", str(duration_s)])
    try:
        if during is not None:
            time.sleep(during_at_s)
            during()
        sender.wait(timeout=duration_s + RECEIVER_SPARE_S)
        # The last datagrams are a path's delay behind the sender's exit: far less than this.
        time.sleep(IN_FLIGHT_S)
        receiver.terminate()
        receiver.wait(timeout=30)
    finally:
        for process in (sender, receiver):
            if process.poll() is None:
                process.kill()
                process.wait()
    lines = [json.loads(line) for line in out.read_text().splitlines()[1:] if line.strip()]
    return ProbeResult(lines, int(duration_s / interval_s))

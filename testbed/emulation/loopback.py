"""A fake live fabric for testing the runner without root: each GPU's agent is a local process on
its own loopback address (127.a.b.r), with no switch, no shaping and no controller. The runner's
orchestration (start-up bounds, the watchdog, agent faults, partial results, cleanup order) runs
as it does on Mininet, over real sockets with real sums; its times say nothing of a fabric, so it
takes only the switched kinds where every GPU reaches every other directly."""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from testbed.core.shaping import LINUX_RTO_MIN_MS
from testbed.emulation.live import LiveFabric
from testbed.emulation.registry import RunRecord, remove_resources
from testbed.fabrics.all_kinds import KINDS
from testbed.fabrics.topology import build_topology
from testbed.model.contracts import Topology
from testbed.model.errors import RunFailed
from testbed.model.fabric_section import FabricSection


def loopback_address(prefix: tuple[int, int], rank: int) -> str:
    """Rank r's address in the run's own 127.a.b.0/24 (all of 127/8 reaches this machine on Linux)."""
    return f"127.{prefix[0]}.{prefix[1]}.{rank + 1}"


class LoopbackHost:
    """A GPU host as a plain local process group."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def popen(self, args: list[str], **kwargs: Any) -> subprocess.Popen:
        # A session of its own, as Mininet gives every host's programs: a Ctrl-C at the terminal
        # reaches the runner, which stops the agents itself.
        return subprocess.Popen(args, start_new_session=True, **kwargs)

    def cmd(self, command: str) -> str:
        raise RunFailed(f"the loopback fabric has no links to change (GPU {self.rank} was asked to run {command!r})")


class LoopbackNetwork:
    def __init__(self, topology: Topology) -> None:
        self.topology = topology

    @property
    def switch_names(self) -> list[str]:
        return []

    def host(self, rank: int) -> LoopbackHost:
        return LoopbackHost(rank)

    def root_node(self) -> LoopbackHost:
        raise RunFailed("the loopback fabric has no switch ports")

    def interact(self) -> None:
        raise RunFailed("the loopback fabric has no Mininet CLI; run on Mininet for --cli")


class NoController:
    """The loopback fabric needs none: every agent reaches every other."""

    @property
    def pid(self) -> int:
        raise RunFailed("the loopback fabric has no controller")

    def check_alive(self) -> None:
        return None

    def restart(self) -> None:
        raise RunFailed("the loopback fabric has no controller to restart")


class LoopbackBackend:
    """An EmulationBackend whose fabric is this machine's loopback interface."""

    def require_platform(self, needs_ovs: bool) -> None:
        return None  # no root, no Open vSwitch: that is the point

    @contextmanager
    def open(self, fabric_spec: FabricSection, host_rate_bps: float, work_dir: Path,
             controller_extra: dict | None = None, slowness: float = 1.0,
             segments_per_packet: int = 0, rto_min_ms: int = LINUX_RTO_MIN_MS) -> Iterator[LiveFabric]:
        spec = KINDS[fabric_spec.kind]
        if spec.routed or spec.aggregation_node:
            raise RunFailed(f"the loopback fabric runs switched fabrics only (elect-*, ps), not {fabric_spec.kind}")
        started = time.monotonic()
        tag = secrets.token_hex(2)
        prefix = (1 + secrets.randbelow(254), 1 + secrets.randbelow(254))
        built = build_topology(fabric_spec, tag, host_rate_bps, "user")  # no datapath: a label only
        topology = built.model_copy(update={"hosts": tuple(
            host.model_copy(update={"ip": loopback_address(prefix, rank)}) for rank, host in enumerate(built.hosts))})
        record = RunRecord.new(f"loopback-{tag}", str(work_dir.resolve()))
        try:
            (work_dir / "topology.json").write_text(topology.dumps())
            timings = {"network_built_s": round(time.monotonic() - started, 3)}
            timings["fabric_programmed_s"] = timings["network_built_s"]
            yield LiveFabric(LoopbackNetwork(topology), NoController(), record, None, timings)
        finally:
            remove_resources(record)  # the agents it recorded, if any outlived the runner's stop

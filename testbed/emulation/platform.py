"""What this machine offers the emulation: root, Open vSwitch, kernel datapath, netem, Mininet."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from testbed.core.steal import CpuSample


def run_quiet(args: list[str], timeout_s: float = 10.0) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, check=False)


def cpu_sample(now_s: float) -> CpuSample:
    """The kernel's steal, total and busy ticks over all cores at `now_s` (monotonic), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    total = sum(fields)
    return CpuSample(now_s, fields[7] if len(fields) > 7 else 0, total, total - fields[3] - fields[4])


def is_root() -> bool:
    return os.geteuid() == 0


def ovs_running() -> bool:
    if shutil.which("ovs-vsctl") is None:
        return False
    try:
        return run_quiet(["ovs-vsctl", "--timeout=3", "show"]).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def ovs_version() -> str | None:
    if shutil.which("ovs-vswitchd") is None:
        return None
    out = run_quiet(["ovs-vswitchd", "--version"]).stdout.split("\n")[0]
    return out.split()[-1] if out else None


# Open vSwitch's own defaults for other_config:max-idle and max-revalidator, in milliseconds.
OVS_MAX_IDLE_MS = 10_000
OVS_MAX_REVALIDATOR_MS = 500


def ovs_counter_refresh_ms() -> int | None:
    """How often Open vSwitch brings its OpenFlow flow counters up to date (its revalidators run
    every max-idle or max-revalidator milliseconds, the shorter), or None if it cannot be asked."""
    values = []
    for key, default in (("max-idle", OVS_MAX_IDLE_MS), ("max-revalidator", OVS_MAX_REVALIDATOR_MS)):
        try:
            done = run_quiet(["ovs-vsctl", "--timeout=3", "--if-exists", "get", "Open_vSwitch", ".",
                              f"other_config:{key}"])
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:
            return None
        text = done.stdout.strip().strip('"')
        values.append(int(text) if text.isdigit() else default)
    return min(values)


def kernel_datapath_available() -> bool:
    """The openvswitch kernel module is loaded or loadable."""
    if os.path.exists("/sys/module/openvswitch"):
        return True
    if shutil.which("modprobe") is None:
        return False
    return run_quiet(["modprobe", "-q", "openvswitch"]).returncode == 0 and os.path.exists("/sys/module/openvswitch")


def datapath() -> str:
    """'kernel' where the OVS kernel module exists, else 'user' (the netdev datapath)."""
    return "kernel" if kernel_datapath_available() else "user"


def netem_available() -> bool:
    """Try a netem qdisc on a dummy device in a scratch namespace that this call creates and removes."""
    if not is_root() or shutil.which("tc") is None:
        return False
    namespace = f"tbprobe{uuid.uuid4().hex[:8]}"
    if run_quiet(["ip", "netns", "add", namespace]).returncode != 0:
        return False
    try:
        inside = ["ip", "netns", "exec", namespace]
        if run_quiet(inside + ["ip", "link", "add", "probe0", "type", "dummy"]).returncode != 0:
            return False
        netem = ["tc", "qdisc", "add", "dev", "probe0", "root", "netem", "delay", "1ms"]
        return run_quiet(inside + netem).returncode == 0
    finally:
        run_quiet(["ip", "netns", "delete", namespace])


def mininet_available() -> bool:
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return False
    return shutil.which("mnexec") is not None


@dataclass(frozen=True)
class PlatformReport:
    root: bool
    ovs_running: bool
    ovs_version: str | None
    datapath: str
    netem: bool
    mininet: bool
    cores: int

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def inspect_platform() -> PlatformReport:
    return PlatformReport(
        root=is_root(),
        ovs_running=ovs_running(),
        ovs_version=ovs_version(),
        datapath=datapath(),
        netem=netem_available(),
        mininet=mininet_available(),
        cores=os.cpu_count() or 1,
    )

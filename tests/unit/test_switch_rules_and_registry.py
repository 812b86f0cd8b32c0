"""The switched kinds' forwarding rules and the registry of what a run created: each host reached on
its port only; orphaned processes found and only recorded live ones ended; listeners read from /proc."""

import os
import subprocess
import sys

from testbed.emulation.controller_proc import listening_inodes, socket_inodes_of
from testbed.emulation.registry import RunRecord, orphan_records, process_alive, process_start_ticks, remove_resources
from testbed.fabrics.programming import switch_rules
from testbed.model.contracts import Topology


def topology(n):
    hosts = [{"name": f"h{i}", "rank": i - 1, "ip": f"10.0.0.{i}", "mac": f"02:00:00:00:00:{i:02x}", "role": "gpu",
              "switch": "s", "port": i, "interfaces": [{"name": f"h{i}-eth0", "mac": f"02:00:00:00:00:{i:02x}",
                                                        "switch": "s", "port": i, "payload_rate_bps": 1e9}]}
             for i in range(1, n + 1)]
    return Topology.model_validate({"fabric": "elect-flat", "datapath": "user", "host_rate_bps": 1e9,
                                    "switches": [{"name": "s", "dpid": 7, "ports": n, "role": "flat"}],
                                    "hosts": hosts})


def test_switch_rules_forward_each_host_to_its_port_only():
    rules = switch_rules(topology(4))[7]
    assert len(rules) == 8
    for rule in rules:
        match = rule.match_dict()
        host = rule.out_port
        assert match.get("eth_dst", f"02:00:00:00:00:{host:02x}") == f"02:00:00:00:00:{host:02x}"
        assert match.get("arp_tpa", f"10.0.0.{host}") == f"10.0.0.{host}"
    # No rule floods or sends to the controller: unknown traffic is dropped (fail-secure).
    assert all(isinstance(r.out_port, int) and 1 <= r.out_port <= 4 for r in rules)


def test_registry_finds_orphans_and_kills_only_recorded_live_processes(scratch_registry):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = RunRecord(run_id="abcd", run_dir="/tmp/x", runner_pid=dead.pid, runner_start=12345)
        record.processes = [(victim.pid, process_start_ticks(victim.pid)), (bystander.pid, 1)]  # wrong start
        record.save()
        live = RunRecord.new("ef01", "/tmp/y")  # this process: alive, so not an orphan
        assert [r.run_id for r in orphan_records()] == ["abcd"]
        removed = remove_resources(orphan_records()[0])
        assert removed["processes"] == 1
        victim.wait(timeout=10)
        assert bystander.poll() is None  # PID recorded with another start time: not ours, untouched
        assert not (scratch_registry / "abcd.json").exists() and live.path.exists()
    finally:
        for p in (victim, bystander):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_process_alive_checks_start_time():
    assert process_alive(os.getpid(), process_start_ticks(os.getpid()))
    assert not process_alive(os.getpid(), -1)


def test_listener_ownership_is_read_from_proc():
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert listening_inodes(port) and listening_inodes(port) <= socket_inodes_of(os.getpid())

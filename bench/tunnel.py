"""Benchmark of the link one emulation would use between machines: a tunnel (gretap, as Mininet's
cluster mode makes, where the kernel has it; VXLAN otherwise) between two network namespaces over a
veth pair standing in for the machines' network, against the bare veth pair: TCP rate (iperf3, 10
s), round-trip time (ping), and the machine's CPU while the rate is measured.

Run as root from the repository: `.venv/bin/python bench/tunnel.py`. Writes
bench/results/tunnel.json and tunnel.md. It creates two namespaces named tbtun-a and tbtun-b and
removes them, whatever happens.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

from bench_results import save_rows

from testbed.core.steal import busy_fraction
from testbed.emulation.platform import cpu_sample

A, B = "tbtun-a", "tbtun-b"
UNDER = ("10.201.0.1", "10.201.0.2")  # the "machines'" addresses
OVER = ("10.202.0.1", "10.202.0.2")  # the emulation's addresses across the tunnel


def sh(command: str, check: bool = True) -> str:
    done = subprocess.run(command, shell=True, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"`{command}` failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def set_up() -> tuple[str | None, list[str]]:
    """The two namespaces joined by a veth pair, and a tunnel over it: the first kind this kernel
    can make (and the kinds it could not)."""
    sh(f"ip netns add {A}")
    sh(f"ip netns add {B}")
    sh(f"ip link add tbtun0 netns {A} type veth peer name tbtun1 netns {B}")
    for ns, dev, addr in ((A, "tbtun0", UNDER[0]), (B, "tbtun1", UNDER[1])):
        sh(f"ip -n {ns} addr add {addr}/24 dev {dev}")
        sh(f"ip -n {ns} link set {dev} up")
        sh(f"ip -n {ns} link set lo up")
    failed = []
    for kind, spec in (("gretap", "type gretap local {local} remote {remote}"),
                       ("vxlan", "type vxlan id 42 local {local} remote {remote} dstport 4789")):
        ends = ((A, UNDER[0], UNDER[1], OVER[0]), (B, UNDER[1], UNDER[0], OVER[1]))
        made = [subprocess.run(f"ip -n {ns} link add tbtunnel " + spec.format(local=local, remote=remote),
                               shell=True, capture_output=True).returncode == 0 for ns, local, remote, _ in ends]
        if all(made):
            for ns, _, _, over in ends:
                sh(f"ip -n {ns} addr add {over}/24 dev tbtunnel")
                sh(f"ip -n {ns} link set tbtunnel up")
            return kind, failed
        for (ns, *_), ok in zip(ends, made):
            if ok:
                sh(f"ip -n {ns} link del tbtunnel")
        failed.append(kind)
    return None, failed


def measure(label: str, server_ns: str, client_ns: str, address: str) -> dict:
    server = subprocess.Popen(["ip", "netns", "exec", server_ns, "iperf3", "-s", "-1", "-B", address],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        busy0 = cpu_sample(time.monotonic())
        out = json.loads(sh(f"ip netns exec {client_ns} iperf3 -J -t 10 -c {address}"))
        busy1 = cpu_sample(time.monotonic())
        server.wait(timeout=10)
    finally:
        if server.poll() is None:
            server.kill()
    pings = sh(f"ip netns exec {client_ns} ping -c 100 -i 0.01 -q {address}")
    rtt = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", pings)
    return {"link": label, "rate_mbps": out["end"]["sum_received"]["bits_per_second"] / 1e6,
            "retransmits": out["end"]["sum_sent"].get("retransmits"),
            "rtt_min_ms": float(rtt.group(1)), "rtt_avg_ms": float(rtt.group(2)), "rtt_max_ms": float(rtt.group(3)),
            "cpu_busy_frac": busy_fraction(busy0, busy1), "status": "ok", "correct": True}


def main() -> int:
    rows = []
    try:
        kind, failed = set_up()
        rows.append(measure("veth (the machines' network)", B, A, UNDER[1]))
        if kind:
            rows.append(measure(f"{kind} tunnel over it", B, A, OVER[1]))
        for missing in failed:
            rows.append({"link": f"{missing}: this kernel cannot make it", "status": "unavailable", "correct": True})
    finally:
        for ns in (A, B):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    header = ["| link | TCP rate (Mb/s) | retransmits | RTT min / avg / max (ms) | CPU busy while measuring |",
              "| --- | ---: | ---: | :---: | ---: |"]

    def cells(r: dict) -> str:
        if r["status"] != "ok":
            return f"{r['link']} | n/a | n/a | n/a | n/a"
        return (f"{r['link']} | {r['rate_mbps']:.0f} | {r['retransmits']} | {r['rtt_min_ms']:.3f} / "
                f"{r['rtt_avg_ms']:.3f} / {r['rtt_max_ms']:.3f} | {100 * r['cpu_busy_frac']:.0f}%")

    save_rows("tunnel", rows, header, cells)
    return 0 if any(r["status"] == "ok" and "tunnel" in r["link"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

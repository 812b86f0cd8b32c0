"""UDP probe stream for measuring paths and dark times inside the emulated fabric.

`python -m hosts.probe send DST PORT --interval-s 0.001 --duration-s 2` sends numbered datagrams;
`python -m hosts.probe recv PORT --duration-s 2 --out FILE` writes one JSON line per arrival with
its sequence number, monotonic send and kernel arrival times (the clock is shared by all hosts) and TTL.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import struct
import sys
import time

from hosts.timing import wait_until

FORMAT = "!Qd"
# Linux <netinet/in.h> and <asm/socket.h>; the socket module does not export these.
IP_RECVTTL = getattr(socket, "IP_RECVTTL", 12)
IP_TTL = getattr(socket, "IP_TTL", 2)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def send(dst: str, port: int, interval_s: float, duration_s: float) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    start = time.monotonic()
    seq = 0
    while (now := time.monotonic()) - start < duration_s:
        try:
            sock.sendto(struct.pack(FORMAT, seq, now), (dst, port))
        except OSError:
            pass  # no route (dark) is part of what is measured
        seq += 1
        # Sleeps through all but the end of the interval and spins the rest: a sender spinning
        # whole intervals starved the controller and switches of a slow machine's CPU.
        wait_until(start + seq * interval_s)


def recv(port: int, duration_s: float, out: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, IP_RECVTTL, 1)
    # The kernel's receive time, not when this process got round to reading: on a busy machine a
    # reader can be descheduled for tens of milliseconds. The kernel stamps wall-clock time; the
    # offset to the monotonic clock (shared with the sender and the controller) is taken once.
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    offset = time.time() - time.monotonic()
    sock.bind(("0.0.0.0", port))
    sock.settimeout(0.1)
    end = time.monotonic() + duration_s
    # Stopped by SIGTERM once the sender is done (a slow machine starts the sender late), or at the
    # end of its duration; what arrived is written either way.
    stopped: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopped.append(signum))
    with open(out, "w") as handle:
        handle.write(json.dumps({"listening": True}) + "\n")
        handle.flush()
        while time.monotonic() < end and not stopped:
            try:
                data, ancillary, _, _ = sock.recvmsg(64, socket.CMSG_SPACE(4) + socket.CMSG_SPACE(16))
            except socket.timeout:
                continue
            arrived = time.monotonic()
            for level, kind, value in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    seconds, nanoseconds = struct.unpack("qq", value[:16])
                    arrived = seconds + nanoseconds * 1e-9 - offset
            ttl = next((struct.unpack("i", d[:4])[0] for level, kind, d in ancillary
                        if level == socket.IPPROTO_IP and kind == IP_TTL), None)
            seq, sent = struct.unpack(FORMAT, data[:struct.calcsize(FORMAT)])
            handle.write(json.dumps({"seq": seq, "sent": sent, "arrived": arrived, "ttl": ttl}) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("send")
    s.add_argument("dst")
    s.add_argument("port", type=int)
    s.add_argument("--interval-s", type=float, default=1e-3)
    s.add_argument("--duration-s", type=float, default=2.0)
    r = sub.add_parser("recv")
    r.add_argument("port", type=int)
    r.add_argument("--duration-s", type=float, default=2.0)
    r.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.mode == "send":
        send(args.dst, args.port, args.interval_s, args.duration_s)
    else:
        recv(args.port, args.duration_s, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

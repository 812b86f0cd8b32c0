"""The aggregation node program: moves packets between its UDP socket and the pure pipeline (each
held its frame time on the link first, hosts/ina/hold.py), answers job registrations on its control
port, paces aggregation to `aggregation_bps`, and writes its counters when stopped. Run inside the
node's host: `python -m hosts.ina.node --config FILE`."""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import sys
import time
from pathlib import Path

from hosts.ina.hold import LinkHold
from hosts.ina.pipeline import Pipeline
from hosts.ina.protocol import CONTROL_PORT, DATA_PORT
from hosts.ina.tables import RegistrationError
from testbed.model.contracts import InaNodeConfig

SOCKET_BUFFER_BYTES = 16 << 20
SO_RCVBUFFORCE, SO_SNDBUFFORCE = 33, 32  # Linux; Python's socket module does not name them
BATCH = 64  # packets drained per readiness check


class Stop(Exception):
    pass


class Node:
    def __init__(self, config: InaNodeConfig) -> None:
        self.config = config
        self.pipeline = Pipeline(config.pool_slots, config.sharing, config.drop_frac, config.seed)
        self.aggregation_bps = config.aggregation_bps  # emulated bits/s of input; None: line rate
        self.hold = LinkHold(config.link_rate_bps)  # each packet waits its frame time on the link
        address = config.address
        self.data = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for forced, plain in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
            try:
                self.data.setsockopt(socket.SOL_SOCKET, forced, SOCKET_BUFFER_BYTES)
            except PermissionError:  # not root: up to the system's limit
                self.data.setsockopt(socket.SOL_SOCKET, plain, SOCKET_BUFFER_BYTES)
        self.data.bind((address, config.data_port or DATA_PORT))
        self.data.setblocking(False)
        self.control = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.control.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.control.bind((address, config.control_port or CONTROL_PORT))
        self.control.listen(64)
        self.bytes_in = 0
        self.busy_s = 0.0
        self.started = time.monotonic()
        self._tokens_at = time.monotonic()

    def serve(self) -> None:
        buffer = bytearray(65536)
        view = memoryview(buffer)
        hold = self.hold
        while True:
            readable, _, _ = select.select([self.data, self.control], [], [], hold.wait_s(time.monotonic(), 0.5))
            if self.control in readable:
                self._control()
            began = time.monotonic()
            if self.data in readable:
                for _ in range(BATCH):
                    try:
                        size, (source, _) = self.data.recvfrom_into(buffer)
                    except BlockingIOError:
                        break
                    if hold.active:
                        hold.add(time.monotonic(), size, (bytes(view[:size]), source))
                    else:
                        self._process(view[:size], source)
            now = time.monotonic()
            while (held := hold.pop_due(now)) is not None:
                self._process(memoryview(held[0]), held[1])
            self.busy_s += time.monotonic() - began

    def _process(self, packet: memoryview, source: str) -> None:
        self.bytes_in += len(packet)
        if self.aggregation_bps:
            self._pace(len(packet))
        for out, destination in self.pipeline.process(packet, source):
            try:
                self.data.sendto(out, destination)
            except OSError:  # a full queue or a vanished host: the worker retransmits
                self.pipeline.counters["send_errors"] += 1

    def _pace(self, size: int) -> None:
        """Token bucket on input bits: the node sums at most aggregation_bps."""
        assert self.aggregation_bps  # paced only when set
        self._tokens_at = max(self._tokens_at, time.monotonic() - 1e-3) + size * 8 / self.aggregation_bps
        delay = self._tokens_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def _control(self) -> None:
        conn, _ = self.control.accept()
        with conn:
            conn.settimeout(2.0)
            try:
                request = b""
                while not request.endswith(b"\n") and len(request) < 1 << 20:
                    part = conn.recv(65536)
                    if not part:
                        break
                    request += part
                reply = self._handle(json.loads(request))
            except (ValueError, OSError) as error:
                reply = {"ok": False, "error": f"malformed control request: {error}"}
            try:
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:
                pass

    def _handle(self, request) -> dict:
        if not isinstance(request, dict) or request.get("op") != "register":
            return {"ok": False, "error": "the control plane understands {'op': 'register', ...} only"}
        try:
            job, workers, window = int(request["job"]), [str(w) for w in request["workers"]], int(request["window"])
            entry = self.pipeline.tables.register(job, workers, window)
        except (KeyError, TypeError, ValueError) as error:  # RegistrationError is a ValueError
            message = str(error) if isinstance(error, RegistrationError) else f"bad registration field: {error}"
            self.pipeline.counters["registrations_refused"] += 1
            return {"ok": False, "error": message}
        return {"ok": True, "sharing": entry.sharing, "slot_base": entry.slot_base, "slot_count": entry.slot_count}

    def report(self) -> dict:
        elapsed = time.monotonic() - self.started
        return {"counters": dict(self.pipeline.counters), "drops": self.pipeline.drops(),
                "bytes_in": self.bytes_in, "busy_frac": self.busy_s / elapsed if elapsed > 0 else 0.0,
                "jobs": {str(j): {"workers": list(e.workers), "slot_base": e.slot_base, "slot_count": e.slot_count}
                         for j, e in self.pipeline.tables.jobs.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    config = InaNodeConfig.loads(Path(args.config).read_text(), where=args.config)

    def stop(signum, frame):
        raise Stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    node = Node(config)
    ready = Path(config.ready)
    ready.with_suffix(".tmp").write_text(json.dumps({"pid": os.getpid()}))
    ready.with_suffix(".tmp").replace(ready)
    try:
        node.serve()
    except Stop:
        pass
    finally:
        Path(config.counters).write_text(json.dumps(node.report(), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

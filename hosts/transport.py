"""Message transports between ranks: TCP sockets for real runs, in-process queues for unit tests."""

from __future__ import annotations

import queue
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from hosts.timing import precise_sleep

HEADER = struct.Struct("!IQB")  # tag, payload bytes, whether the sender waits for an ACK
HELLO = struct.Struct("!I")  # sender rank, first bytes on every connection
ACK = b"\x06"  # receiver to sender, once a whole message has arrived


class TransportError(RuntimeError):
    """A peer could not be reached, closed early, or sent something unexpected."""


class WaitBoard:
    """What each thread of a host is blocked on (which peer, which message), so a run that stops
    making progress can say who waits for whom instead of going quiet."""

    def __init__(self) -> None:
        self._waits: dict[int, dict] = {}

    @contextmanager
    def waiting(self, what: str, peer: int, tag: int | None = None) -> Iterator[None]:
        key = threading.get_ident()
        self._waits[key] = {"what": what, "peer": peer, "tag": tag, "since_monotonic_s": time.monotonic()}
        try:
            yield
        finally:
            self._waits.pop(key, None)

    def snapshot(self) -> list[dict]:
        return [dict(w) for w in list(self._waits.values())]


class SendHandle:
    """Completion of an asynchronous send."""

    def __init__(self, peer: int = -1, board: WaitBoard | None = None) -> None:
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._peer = peer
        self._board = board

    def _finish(self, error: BaseException | None = None) -> None:
        self._error = error
        self._done.set()

    def wait(self, timeout_s: float | None = None) -> None:
        if self._board is not None and not self._done.is_set():
            with self._board.waiting("send completion", self._peer):
                done = self._done.wait(timeout_s)
        else:
            done = self._done.wait(timeout_s)
        if not done:
            raise TransportError("send did not complete in time")
        if self._error is not None:
            raise TransportError(f"send failed: {self._error}") from self._error


class Transport(Protocol):
    rank: int

    def send(self, peer: int, tag: int, payload: np.ndarray, confirm: bool = False) -> SendHandle: ...

    def recv_into(self, peer: int, tag: int, out: np.ndarray) -> None: ...

    def recv_any(self, peer: int) -> tuple[int, np.ndarray]: ...


@dataclass
class LatencyRecord:
    """Per-message latency (alpha) the sender applied, and how far its waits overshot."""

    target_s: float
    overshoots_s: list[float] = field(default_factory=list)


class InProcessTransport:
    """Ranks as threads of one process; copies payloads. For unit tests of collectives."""

    def __init__(self, rank: int, mailboxes: dict[tuple[int, int], queue.Queue]) -> None:
        self.rank = rank
        self._mailboxes = mailboxes
        self._stash: dict[tuple[int, int], np.ndarray] = {}

    @staticmethod
    def mesh(ranks: int) -> list["InProcessTransport"]:
        boxes: dict[tuple[int, int], queue.Queue] = {
            (a, b): queue.Queue() for a in range(ranks) for b in range(ranks) if a != b
        }
        return [InProcessTransport(r, boxes) for r in range(ranks)]

    def send(self, peer: int, tag: int, payload: np.ndarray, confirm: bool = False) -> SendHandle:
        self._mailboxes[(self.rank, peer)].put((tag, np.array(payload, copy=True)))
        handle = SendHandle()
        handle._finish()
        return handle

    def recv_into(self, peer: int, tag: int, out: np.ndarray) -> None:
        """Like TcpTransport.recv_into: messages may be asked for in another order than sent."""
        while (peer, tag) not in self._stash:
            got_tag, payload = self._mailboxes[(peer, self.rank)].get(timeout=30)
            self._stash[(peer, got_tag)] = payload
        payload = self._stash.pop((peer, tag))
        if payload.nbytes != out.nbytes:
            raise TransportError(f"rank {self.rank} expected tag {tag} ({out.nbytes} B) from {peer}, "
                                 f"got {payload.nbytes} B")
        out.data.cast("B")[:] = np.ascontiguousarray(payload).data.cast("B")

    def recv_any(self, peer: int) -> tuple[int, np.ndarray]:
        """The next message from `peer`, whatever its tag, as bytes (one caller per peer)."""
        for key in list(self._stash):
            if key[0] == peer:
                return key[1], _as_bytes(self._stash.pop(key))
        tag, payload = self._mailboxes[(peer, self.rank)].get(timeout=30)
        return tag, _as_bytes(payload)


def _as_bytes(payload: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(payload).reshape(-1).view(np.uint8)


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    while len(view):
        got = sock.recv_into(view)
        if got == 0:
            raise TransportError("peer closed the connection")
        view = view[got:]


class TcpTransport:
    """One TCP connection per ordered pair of ranks, opened on first use; alpha applied per message."""

    def __init__(self, rank: int, addresses: list[str], port: int, latency_s: float = 0.0,
                 connect_timeout_s: float = 30.0) -> None:
        self.rank = rank
        self.addresses = addresses
        self.port = port
        self.latency = LatencyRecord(target_s=latency_s)
        self.connect_timeout_s = connect_timeout_s
        self.board = WaitBoard()
        self._incoming: dict[int, socket.socket] = {}
        self._incoming_ready = threading.Condition()
        self._senders: dict[int, tuple[socket.socket, queue.Queue]] = {}
        self._senders_lock = threading.Lock()  # services send from several reader threads
        self._stash: dict[tuple[int, int], np.ndarray] = {}
        # Receives may run in several threads at once (DAG schedules): one of them at a time reads
        # a peer's socket, a message at a time, and stashes what is another's.
        self._reading: set[int] = set()
        self._stashed = threading.Condition()
        self._listener = socket.create_server((addresses[rank], port), backlog=len(addresses) + 4)
        self._closed = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hello = bytearray(HELLO.size)
            _recv_exact(conn, memoryview(hello))
            (peer,) = HELLO.unpack(hello)
            with self._incoming_ready:
                self._incoming[peer] = conn
                self._incoming_ready.notify_all()

    def _connect(self, peer: int) -> socket.socket:
        with self.board.waiting("connection", peer):
            return self._connect_now(peer)

    def _connect_now(self, peer: int) -> socket.socket:
        deadline = time.monotonic() + self.connect_timeout_s
        while True:
            try:
                sock = socket.create_connection((self.addresses[peer], self.port), timeout=2.0)
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.sendall(HELLO.pack(self.rank))
                return sock
            except OSError as error:
                if time.monotonic() > deadline:
                    raise TransportError(f"rank {self.rank} could not reach rank {peer}: {error}") from error
                time.sleep(0.02)

    def _sender(self, peer: int) -> queue.Queue:
        with self._senders_lock:
            if peer not in self._senders:
                sock = self._connect(peer)
                work: queue.Queue = queue.Queue()
                threading.Thread(target=self._send_loop, args=(sock, work), daemon=True).start()
                self._senders[peer] = (sock, work)
            return self._senders[peer][1]

    def _send_loop(self, sock: socket.socket, work: queue.Queue) -> None:
        while True:
            item = work.get()
            if item is None:
                return
            tag, payload, confirm, handle = item
            try:
                if self.latency.target_s > 0:
                    self.latency.overshoots_s.append(precise_sleep(self.latency.target_s))
                sock.sendall(HEADER.pack(tag, payload.nbytes, confirm))
                sock.sendall(memoryview(payload).cast("B"))
                if confirm:
                    # Rendezvous: complete when the receiver has it, not when the kernel buffered
                    # it, so this rank's next send cannot overlap it (as alpha-beta assumes).
                    _recv_exact(sock, memoryview(bytearray(1)))
                handle._finish()
            except OSError as error:
                handle._finish(error)

    def connect_all(self, peers: list[int]) -> None:
        """Open outgoing connections ahead of the timed part."""
        for peer in peers:
            self._sender(peer)

    def send(self, peer: int, tag: int, payload: np.ndarray, confirm: bool = False) -> SendHandle:
        handle = SendHandle(peer, self.board)
        self._sender(peer).put((tag, np.ascontiguousarray(payload), confirm, handle))
        return handle

    def _incoming_from(self, peer: int) -> socket.socket:
        deadline = time.monotonic() + self.connect_timeout_s
        with self._incoming_ready:
            while peer not in self._incoming:
                if not self._incoming_ready.wait(timeout=max(0.0, deadline - time.monotonic())):
                    raise TransportError(f"rank {self.rank} heard nothing from rank {peer}")
            return self._incoming[peer]

    def recv_into(self, peer: int, tag: int, out: np.ndarray) -> None:
        """Receive message `tag` from `peer` into `out`, whatever order the peer sent it in: other
        messages that arrive first are kept until their own receive asks for them (a schedule
        orders sends and receives independently on each GPU). The expected message is read
        straight into `out`."""
        with self.board.waiting("receive", peer, tag):
            self._recv_into(peer, tag, out)

    def _recv_into(self, peer: int, tag: int, out: np.ndarray) -> None:
        key = (peer, tag)
        while True:
            with self._stashed:
                while key not in self._stash and peer in self._reading:
                    self._stashed.wait()
                if key in self._stash:
                    payload = self._stash.pop(key)
                    break
                self._reading.add(peer)
            try:
                if self._read_one(peer, tag, out):
                    return
            finally:
                with self._stashed:
                    self._reading.discard(peer)
                    self._stashed.notify_all()
        if payload.nbytes != out.nbytes:
            raise TransportError(f"rank {self.rank}: message {tag} from rank {peer} has {payload.nbytes} B, "
                                 f"expected {out.nbytes} B")
        out.data.cast("B")[:] = payload.data

    def _read_one(self, peer: int, tag: int, out: np.ndarray) -> bool:
        """Read `peer`'s next message: into `out` if it is `tag` (True), else into the stash."""
        sock = self._incoming_from(peer)
        header = bytearray(HEADER.size)
        _recv_exact(sock, memoryview(header))
        got_tag, size, confirm = HEADER.unpack(header)
        if got_tag == tag:
            if size != out.nbytes:
                raise TransportError(f"rank {self.rank} expected tag {tag} ({out.nbytes} B) from rank {peer}, "
                                     f"got {size} B")
            _recv_exact(sock, out.data.cast("B"))
            if confirm:
                sock.sendall(ACK)
            return True
        payload = np.empty(size, dtype=np.uint8)
        _recv_exact(sock, payload.data)
        if confirm:
            sock.sendall(ACK)
        with self._stashed:
            self._stash[(peer, got_tag)] = payload
        return False

    def recv_any(self, peer: int) -> tuple[int, np.ndarray]:
        """The next message from `peer`, whatever its tag, as bytes: for readers that dispatch on
        the tag themselves (one reader per peer at a time)."""
        with self._stashed:
            for key in list(self._stash):
                if key[0] == peer:
                    return key[1], self._stash.pop(key)
        with self.board.waiting("receive", peer):
            return self._recv_next(peer)

    def _recv_next(self, peer: int) -> tuple[int, np.ndarray]:
        sock = self._incoming_from(peer)
        header = bytearray(HEADER.size)
        _recv_exact(sock, memoryview(header))
        tag, size, confirm = HEADER.unpack(header)
        payload = np.empty(size, dtype=np.uint8)
        _recv_exact(sock, payload.data)
        if confirm:
            sock.sendall(ACK)
        return tag, payload

    def close(self) -> None:
        self._closed = True
        for sock, work in self._senders.values():
            work.put(None)
        self._listener.close()
        for sock in [s for s, _ in self._senders.values()] + list(self._incoming.values()):
            try:
                sock.close()
            except OSError:
                pass

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

from hosts.timing import precise_sleep, wait_until
from testbed.shared.wire import CONTROL_TOS

HEADER = struct.Struct("!IQB")  # tag, payload bytes, flags (below)
# flags: the sender waits for a DELIVERED stamp; the receiver takes it without a receive posted;
# the payload waits for a CLEAR_TO_SEND
CONFIRM, EAGER, RENDEZVOUS = 1, 2, 4
HELLO = struct.Struct("!I")  # sender rank, first bytes on every connection
# Receiver to sender, once a whole message has arrived: when it did, on the clock every emulated
# host shares (one machine's CLOCK_MONOTONIC, which network namespaces do not separate). A send's
# step ends when its bytes were delivered, as the alpha-beta model ends it; the way back only says
# so, and on a busy machine the sender wakes to it milliseconds later (seven senders of a gather
# ended 2-15 ms after the root had every byte).
DELIVERED = struct.Struct("!d")
# Receiver to sender, for a rendezvous message, once a receive from the sender is posted: when
# the receiver reached the exchange, on the shared clock. The payload leaves alpha after the later
# of that and the sender's own arrival, as the oracle moves a step-by-step collective's message
# (all-to-all, trees, halving-doubling) once both ends reached its exchange. Without the handshake
# TCP moved a message into the receiver's socket buffer while the receiver was still busy with the
# step before, and a pairwise all-to-all on SiP-Ring's relayed lightpaths finished 9-11% early.
# Alpha is counted from the arrivals, not from when the clear-to-send reached the sender: the
# handshake's round trip and the wake-ups of the threads on either end (1-4 ms of wall time per
# round with 8-16 ranks on 2 cores) are the emulator's, and added after alpha they made binomial
# reduces 4-8% slow; counted inside it they cost nothing until they exceed it, and what exceeds it
# is recorded as the latency wait's overshoot. Rings and collectives whose messages all move at
# once (gather, scatter) do without: the oracle has their traffic flow as soon as it is sent, and
# a handshake per message would only add to them.
CLEAR_TO_SEND = struct.Struct("!d")


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
        self.delivered_s: float | None = None  # a confirmed send: when the receiver had it all

    def _finish(self, error: BaseException | None = None, delivered_s: float | None = None) -> None:
        self._error = error
        self.delivered_s = delivered_s
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

    def send(self, peer: int, tag: int, payload: np.ndarray, confirm: bool = False,
             eager: bool = False, rendezvous: bool = False, ready_s: float | None = None) -> SendHandle: ...

    def recv_into(self, peer: int, tag: int, out: np.ndarray, ready_s: float | None = None) -> float | None: ...

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
        self._stash: dict[int, list[tuple[int, np.ndarray]]] = {}  # by peer, in arrival order

    @staticmethod
    def mesh(ranks: int) -> list["InProcessTransport"]:
        boxes: dict[tuple[int, int], queue.Queue] = {
            (a, b): queue.Queue() for a in range(ranks) for b in range(ranks) if a != b
        }
        return [InProcessTransport(r, boxes) for r in range(ranks)]

    def send(self, peer: int, tag: int, payload: np.ndarray, confirm: bool = False,
             eager: bool = False, rendezvous: bool = False, ready_s: float | None = None) -> SendHandle:
        self._mailboxes[(self.rank, peer)].put((tag, np.array(payload, copy=True)))
        handle = SendHandle()
        handle._finish()
        return handle

    def recv_into(self, peer: int, tag: int, out: np.ndarray, ready_s: float | None = None) -> float | None:
        """Like TcpTransport.recv_into: messages may be asked for in another order than sent (and
        no arrival time: None)."""
        early = self._stash.setdefault(peer, [])
        while not any(got == tag for got, _ in early):
            early.append(self._mailboxes[(peer, self.rank)].get(timeout=30))
        payload = early.pop(next(i for i, (got, _) in enumerate(early) if got == tag))[1]
        if payload.nbytes != out.nbytes:
            raise TransportError(f"rank {self.rank} expected tag {tag} ({out.nbytes} B) from {peer}, "
                                 f"got {payload.nbytes} B")
        out.data.cast("B")[:] = np.ascontiguousarray(payload).data.cast("B")
        return None

    def recv_any(self, peer: int) -> tuple[int, np.ndarray]:
        """The next message from `peer`, whatever its tag, as bytes (one caller per peer)."""
        if self._stash.get(peer):
            tag, payload = self._stash[peer].pop(0)
            return tag, _as_bytes(payload)
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


class _Posted:
    """A receive waiting for its message: the buffer it reads into, and how it ended."""

    def __init__(self, out: np.ndarray | None, ready_s: float | None = None) -> None:
        self.out = out
        self.ready_s = time.monotonic() if ready_s is None else ready_s  # when its rank reached it
        self.tag: int | None = None
        self.payload: np.ndarray | None = None  # a recv_any's message
        self.error: BaseException | None = None
        self.arrived_s: float | None = None  # when its last byte was read
        self.done = threading.Event()


class _Inbox:
    """The messages from one peer that arrived before their receive, in arrival order, and the
    receives posted before their message: the eager protocol's two queues (as in MPI and NCCL).
    A reader thread per peer takes an eager message whatever the receiver is doing, so its send
    never waits for its receive to be posted; other messages while a receive from that peer is."""

    def __init__(self) -> None:
        self.arrived: list[tuple[int, np.ndarray]] = []
        self.posted: dict[int, list[_Posted]] = {}
        self.any_posted: list[_Posted] = []
        self.error: BaseException | None = None

    def take_posted(self, tag: int) -> _Posted | None:
        waiting = self.posted.get(tag)
        if waiting:
            return waiting.pop(0)
        return self.any_posted.pop(0) if self.any_posted else None

    def take_arrived(self, tag: int | None) -> tuple[int, np.ndarray] | None:
        for index, (got, payload) in enumerate(self.arrived):
            if tag is None or got == tag:
                return self.arrived.pop(index)
        return None

    def waiting(self) -> bool:
        """Whether any receive from this peer is posted."""
        return bool(self.any_posted) or any(self.posted.values())

    def fail(self, error: BaseException) -> None:
        self.error = error
        for posted in [p for waiting in self.posted.values() for p in waiting] + self.any_posted:
            posted.error = error
            posted.done.set()
        self.posted.clear()
        self.any_posted.clear()


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
        self._inboxes: dict[int, _Inbox] = {}
        self._inbox_lock = threading.Lock()  # guards _incoming and every inbox
        self._posting = threading.Condition(self._inbox_lock)  # a receive was posted
        self._senders: dict[int, tuple[socket.socket, queue.Queue]] = {}
        self._senders_lock = threading.Lock()  # services send from several reader threads
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
            conn.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, CONTROL_TOS)  # it only answers: small first
            hello = bytearray(HELLO.size)
            _recv_exact(conn, memoryview(hello))
            (peer,) = HELLO.unpack(hello)
            with self._inbox_lock:
                self._incoming[peer] = conn
            threading.Thread(target=self._read_loop, args=(peer, conn), daemon=True,
                             name=f"from rank {peer}").start()

    def _inbox(self, peer: int) -> _Inbox:
        """`peer`'s inbox (call with _inbox_lock held)."""
        return self._inboxes.setdefault(peer, _Inbox())

    def _read_loop(self, peer: int, sock: socket.socket) -> None:
        """Drain `peer`'s connection as messages arrive: into the buffer of a receive already
        posted for it, else into memory until its receive comes."""
        header = bytearray(HEADER.size)
        try:
            while True:
                _recv_exact(sock, memoryview(header))
                tag, size, flags = HEADER.unpack(header)
                confirm = flags & CONFIRM
                with self._inbox_lock:
                    inbox = self._inbox(peer)
                    posted = inbox.take_posted(tag)
                    # A message not sent eagerly is read only while a receive from its sender is
                    # posted: until then TCP holds its sender back (and a rendezvous message's
                    # payload waits for the clear-to-send), as collectives and summation services
                    # expect of their peers.
                    while posted is None and not flags & EAGER and not inbox.waiting() and not self._closed:
                        self._posting.wait(0.5)
                        posted = inbox.take_posted(tag)
                if flags & RENDEZVOUS:
                    sock.sendall(CLEAR_TO_SEND.pack(time.monotonic() if posted is None else posted.ready_s))
                if posted is not None and posted.out is not None and posted.out.nbytes == size:
                    _recv_exact(sock, posted.out.data.cast("B"))  # the common case: no copy
                    payload = None
                else:
                    payload = np.empty(size, dtype=np.uint8)
                    _recv_exact(sock, payload.data)
                arrived_s = time.monotonic()
                if confirm:
                    sock.sendall(DELIVERED.pack(arrived_s))
                if posted is None:
                    with self._inbox_lock:  # a receive may have been posted while it was read
                        posted = self._inbox(peer).take_posted(tag)
                        if posted is None:
                            assert payload is not None  # nothing was posted, so it was read into memory
                            self._inbox(peer).arrived.append((tag, payload))
                            continue
                self._complete(posted, peer, tag, payload, arrived_s)
        except (OSError, TransportError) as error:
            with self._inbox_lock:
                self._inbox(peer).fail(error if not self._closed else TransportError("transport closed"))

    def _complete(self, posted: _Posted, peer: int, tag: int, payload: np.ndarray | None,
                  arrived_s: float) -> None:
        posted.tag = tag
        posted.arrived_s = arrived_s
        if posted.out is None:
            posted.payload = payload
        elif payload is not None:
            try:
                self._copy(peer, tag, payload, posted.out)
            except TransportError as error:
                posted.error = error
        posted.done.set()

    def _copy(self, peer: int, tag: int, payload: np.ndarray, out: np.ndarray) -> None:
        if payload.nbytes != out.nbytes:
            raise TransportError(f"rank {self.rank}: message {tag} from rank {peer} has {payload.nbytes} B, "
                                 f"expected {out.nbytes} B")
        out.data.cast("B")[:] = payload.data

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
            tag, payload, flags, handle, ready_s = item
            try:
                header = HEADER.pack(tag, payload.nbytes, flags)
                if flags & RENDEZVOUS:  # the payload leaves alpha after both ends reached the exchange
                    sock.sendall(header)
                    cleared = bytearray(CLEAR_TO_SEND.size)
                    _recv_exact(sock, memoryview(cleared))
                    (receiver_ready_s,) = CLEAR_TO_SEND.unpack(cleared)
                    if self.latency.target_s > 0:
                        self.latency.overshoots_s.append(
                            wait_until(max(ready_s, receiver_ready_s) + self.latency.target_s))
                elif self.latency.target_s > 0:
                    self.latency.overshoots_s.append(precise_sleep(self.latency.target_s))
                if not flags & RENDEZVOUS:
                    sock.sendall(header)
                sock.sendall(memoryview(payload).cast("B"))
                delivered_s = None
                if flags & CONFIRM:
                    # Confirmed: complete when the receiver has it, not when the kernel buffered
                    # it, so this rank's next send cannot overlap it (as alpha-beta assumes).
                    stamp = bytearray(DELIVERED.size)
                    _recv_exact(sock, memoryview(stamp))
                    (delivered_s,) = DELIVERED.unpack(stamp)
                handle._finish(delivered_s=delivered_s)
            except OSError as error:
                handle._finish(error)

    def connect_all(self, peers: list[int]) -> None:
        """Open outgoing connections ahead of the timed part."""
        for peer in peers:
            self._sender(peer)

    def send(self, peer: int, tag: int, payload: np.ndarray, confirm: bool = False,
             eager: bool = False, rendezvous: bool = False, ready_s: float | None = None) -> SendHandle:
        """Queue a message; `eager` (a trace's point-to-point send, as ASTRA-sim and NCCL send
        them) lets the receiver take it before its receive is posted, so the send completes once
        delivered; otherwise it is read while the receiver has a receive from this rank posted,
        and with `rendezvous` its payload does not move before then either (CLEAR_TO_SEND), and
        leaves alpha after the later of `ready_s` (when this rank reached the exchange on the
        shared clock; now if not given) and the receiver's."""
        handle = SendHandle(peer, self.board)
        flags = (CONFIRM if confirm else 0) | (EAGER if eager else 0) | (RENDEZVOUS if rendezvous else 0)
        ready_s = time.monotonic() if ready_s is None else ready_s
        self._sender(peer).put((tag, np.ascontiguousarray(payload), flags, handle, ready_s))
        return handle

    def recv_into(self, peer: int, tag: int, out: np.ndarray, ready_s: float | None = None) -> float | None:
        """Receive message `tag` from `peer` into `out`, whatever order the peer sent it in: a
        message that arrived first waits in memory for its receive (a schedule orders sends and
        receives independently on each GPU), and a receive posted first is read into directly.
        Returns when the receive was done on the clock every host shares: when its last byte was
        read, which the waiting thread may hear of milliseconds later on a busy machine, or, for
        a message that was in before its receive, when it was copied. `ready_s`: when this rank
        reached the exchange, for a rendezvous sender (now if not given)."""
        posted = _Posted(out, ready_s)
        got = self._receive(peer, tag, out, posted)
        if got is not None:
            self._copy(peer, tag, got[1], out)
            return time.monotonic()
        return posted.arrived_s

    def recv_any(self, peer: int) -> tuple[int, np.ndarray]:
        """The next message from `peer`, whatever its tag, as bytes: for readers that dispatch on
        the tag themselves (one reader per peer at a time)."""
        got = self._receive(peer, None, None)
        assert got is not None
        return got

    def _receive(self, peer: int, tag: int | None, out: np.ndarray | None,
                 posted: _Posted | None = None) -> tuple[int, np.ndarray] | None:
        """The message (`tag`, or the next of any tag) if it already arrived; else post a receive
        (into `out` if given) and wait for it, returning what a recv_any gets (None: it is in `out`)."""
        with self._inbox_lock:
            inbox = self._inbox(peer)
            arrived = inbox.take_arrived(tag)
            if arrived is not None:
                return arrived
            if inbox.error is not None:
                raise TransportError(f"rank {self.rank}: no message {'' if tag is None else tag} from rank {peer}: "
                                     f"{inbox.error}")
            posted = _Posted(out) if posted is None else posted
            (inbox.any_posted if tag is None else inbox.posted.setdefault(tag, [])).append(posted)
            self._posting.notify_all()
        with self.board.waiting("receive", peer, tag):
            self._wait(peer, posted)
        if out is not None:
            return None
        assert posted.tag is not None and posted.payload is not None
        return posted.tag, posted.payload

    def _wait(self, peer: int, posted: _Posted) -> None:
        """Until `posted` has its message; an error if the peer never connects or its connection fails."""
        deadline = time.monotonic() + self.connect_timeout_s
        while not posted.done.wait(0.5):
            with self._inbox_lock:
                if peer not in self._incoming and time.monotonic() > deadline and not posted.done.is_set():
                    inbox = self._inbox(peer)
                    for waiting in [*inbox.posted.values(), inbox.any_posted]:
                        if posted in waiting:
                            waiting.remove(posted)
                    raise TransportError(f"rank {self.rank} heard nothing from rank {peer}")
        if posted.error is not None:
            raise TransportError(f"rank {self.rank}: receive from rank {peer} failed: {posted.error}") \
                from posted.error

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

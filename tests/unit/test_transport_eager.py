"""The transport's eager protocol over real sockets on loopback: a send completes once its bytes
are delivered, whether or not the receiver has posted its receive yet (as in ASTRA-sim and NCCL),
so every rank may send before it receives."""

import socket
import threading
import time

import numpy as np
import pytest

from hosts.transport import TcpTransport, TransportError

BIG = 16 * 1024 * 1024  # far beyond the kernel's socket buffers: a rendezvous send would block


def _mesh(ranks, latency_s=0.0):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    addresses = [f"127.0.0.{r + 1}" for r in range(ranks)]
    return [TcpTransport(r, addresses, port, latency_s=latency_s, connect_timeout_s=10) for r in range(ranks)]


def test_every_rank_sends_to_its_successor_before_receiving():
    ranks = 4
    transports = _mesh(ranks)
    try:
        # Each rank's send completes with no receive posted anywhere.
        handles = [t.send((t.rank + 1) % ranks, 7, np.full(BIG, t.rank, dtype=np.uint8), eager=True)
                   for t in transports]
        for handle in handles:
            handle.wait(30)
        for t in transports:
            out = np.zeros(BIG, dtype=np.uint8)
            t.recv_into((t.rank - 1) % ranks, 7, out)
            assert (out == (t.rank - 1) % ranks).all()
    finally:
        for t in transports:
            t.close()


def test_a_message_not_sent_eagerly_waits_for_a_receive_from_its_sender():
    """Collectives and summation services rely on TCP holding a sender back until its receiver
    reads: without `eager`, a message too large for the socket buffers is not delivered (its
    send does not complete) until a receive from that sender is posted."""
    a, b = _mesh(2)
    try:
        handle = a.send(1, 5, np.full(BIG, 3, dtype=np.uint8))
        with pytest.raises(TransportError, match="in time"):
            handle.wait(1.0)
        out = np.zeros(BIG, dtype=np.uint8)
        b.recv_into(0, 5, out)
        handle.wait(10)
        assert (out == 3).all()
    finally:
        a.close()
        b.close()


def test_a_rendezvous_message_moves_only_once_its_receive_is_posted():
    """Step-by-step collectives move a message once its receiver reached the exchange, as the
    oracle has them: even a message the socket buffers would hold stays at its sender (its
    confirmed send does not complete) until a receive from that sender is posted."""
    a, b = _mesh(2)
    try:
        handle = a.send(1, 5, np.full(1000, 3, dtype=np.uint8), confirm=True, rendezvous=True)
        with pytest.raises(TransportError, match="in time"):
            handle.wait(1.0)
        assert not b._inbox(0).arrived  # nothing was read ahead of the receive
        out = np.zeros(1000, dtype=np.uint8)
        arrived = b.recv_into(0, 5, out)
        handle.wait(10)
        assert (out == 3).all() and handle.delivered_s == arrived
    finally:
        a.close()
        b.close()


def test_a_rendezvous_payload_leaves_alpha_after_both_ends_reached_the_exchange():
    """Alpha counts from when the later end reached the exchange (the shared clock), not from
    when the clear-to-send got back to the sender: the handshake and the threads' wake-ups are the
    emulator's own, hidden inside alpha. Hand timeline (s after t0): the sender is ready at 0, the
    receiver at 0.05 but posts its receive only at 0.1; alpha 0.3, so the 1,000 bytes leave at
    0.35 (not 0.1 + round trip + 0.3)."""
    a, b = _mesh(2, latency_s=0.3)
    try:
        a.connect_all([1])
        t0 = time.monotonic()
        handle = a.send(1, 5, np.full(1000, 3, dtype=np.uint8), confirm=True, rendezvous=True, ready_s=t0)
        time.sleep(0.1)
        out = np.zeros(1000, dtype=np.uint8)
        b.recv_into(0, 5, out, ready_s=t0 + 0.05)
        handle.wait(10)
        assert handle.delivered_s is not None
        assert 0.35 <= handle.delivered_s - t0 < 0.39 and (out == 3).all()
        # Both ends reached the next exchange long ago: the payload leaves at once, and how late
        # it is shows as the latency wait's overshoot.
        late = time.monotonic() - 1.0
        handle = a.send(1, 6, np.full(1000, 4, dtype=np.uint8), confirm=True, rendezvous=True, ready_s=late)
        b.recv_into(0, 6, out, ready_s=late)
        handle.wait(10)
        assert a.latency.overshoots_s[-1] >= 0.7 and (out == 4).all()
    finally:
        a.close()
        b.close()


def test_repeated_tags_match_in_order_and_posted_receives_read_in_place():
    a, b = _mesh(2)
    try:
        got = [np.zeros(1000, dtype=np.uint8) for _ in range(3)]
        early = threading.Thread(target=b.recv_into, args=(0, 3, got[0]))
        early.start()  # posted before anything is sent
        for value in (1, 2, 3):
            a.send(1, 3, np.full(1000, value, dtype=np.uint8)).wait(10)
        early.join(10)
        b.recv_into(0, 3, got[1])
        b.recv_into(0, 3, got[2])
        assert [int(g[0]) for g in got] == [1, 2, 3] and all((g == g[0]).all() for g in got)
        tag, payload = (a.send(1, 9, np.arange(10, dtype=np.uint8)).wait(10), b.recv_any(0))[1]
        assert tag == 9 and payload.tolist() == list(range(10))
    finally:
        a.close()
        b.close()


def test_a_size_mismatch_is_an_error_not_a_hang():
    a, b = _mesh(2)
    try:
        a.send(1, 4, np.zeros(100, dtype=np.uint8)).wait(10)
        with pytest.raises(TransportError, match="100 B, expected 50 B"):
            b.recv_into(0, 4, np.zeros(50, dtype=np.uint8))
    finally:
        a.close()
        b.close()


def test_a_confirmed_send_reports_when_its_bytes_were_delivered():
    """The receiver stamps the instant it had the whole message on the clock every host shares; the
    sender's step ends then, not when the stamp reached it (hosts.transport.DELIVERED)."""
    import time

    sender, receiver = _mesh(2)
    try:
        issued = time.monotonic()
        handle = sender.send(1, 9, np.ones(1 << 20, dtype=np.uint8), confirm=True, eager=True)
        out = np.zeros(1 << 20, dtype=np.uint8)
        arrived = receiver.recv_into(0, 9, out)
        received = time.monotonic()
        handle.wait(30)
        heard = time.monotonic()
        assert out.all()
        assert handle.delivered_s is not None
        assert issued < handle.delivered_s <= heard
        assert handle.delivered_s <= received  # stamped by the reader thread before recv_into returned
        # The receive ends when its last byte was read, or (read into memory before its receive
        # was posted) when recv_into copied it: never after the receiver heard of it.
        assert arrived is not None and handle.delivered_s <= arrived <= received
        unconfirmed = sender.send(1, 10, np.ones(8, dtype=np.uint8), eager=True)
        unconfirmed.wait(30)
        assert unconfirmed.delivered_s is None
    finally:
        sender.close()
        receiver.close()

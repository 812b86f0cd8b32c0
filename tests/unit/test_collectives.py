import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hosts.collectives import ring_allreduce, ring_barrier
from hosts.data import expected_sum, gradient
from hosts.transport import InProcessTransport, TcpTransport


def run_ranks(transports, body):
    results, errors = [None] * len(transports), []

    def worker(rank):
        try:
            results[rank] = body(transports[rank])
        except BaseException as error:  # surfaced below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(r,)) for r in range(len(transports))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    return results


@settings(max_examples=40, deadline=None)
@given(ranks=st.integers(2, 9), elements=st.integers(1, 3000), seed=st.integers(0, 2**16))
def test_ring_allreduce_is_exact_in_process(ranks, elements, seed):
    transports = InProcessTransport.mesh(ranks)
    inputs = [gradient(seed, 0, r, elements) for r in range(ranks)]

    def body(transport):
        data = inputs[transport.rank].copy()
        ring_allreduce(transport, list(range(ranks)), data)
        return data

    want = expected_sum(seed, 0, ranks, elements)
    for got in run_ranks(transports, body):
        assert np.array_equal(got, want)


def test_ring_allreduce_random_floats_close_to_numpy():
    ranks, rng = 5, np.random.default_rng(7)
    inputs = [rng.standard_normal(1001).astype(np.float32) for _ in range(ranks)]
    transports = InProcessTransport.mesh(ranks)

    def body(transport):
        data = inputs[transport.rank].copy()
        ring_allreduce(transport, list(range(ranks)), data)
        return data

    want = np.sum(inputs, axis=0)
    for got in run_ranks(transports, body):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_barrier_gives_everyone_the_same_start():
    transports = InProcessTransport.mesh(6)
    starts = run_ranks(transports, lambda t: ring_barrier(t, list(range(6)), tag=99))
    assert len(set(starts)) == 1


@pytest.mark.parametrize("ranks", [2, 4])
def test_ring_allreduce_over_tcp_loopback(ranks):
    """Real sockets on loopback addresses (127.0.0.x): the transport the agents use."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    addresses = [f"127.0.0.{r + 1}" for r in range(ranks)]
    transports = [TcpTransport(r, addresses, port, latency_s=1e-4, connect_timeout_s=10) for r in range(ranks)]
    elements = 250_001
    try:
        def body(transport):
            data = gradient(3, 1, transport.rank, elements)
            ring_allreduce(transport, list(range(ranks)), data, tag_base=1 << 16)
            ring_barrier(transport, list(range(ranks)), tag=5)
            return data

        results = run_ranks(transports, body)
    finally:
        for t in transports:
            t.close()
    want = expected_sum(3, 1, ranks, elements)
    for got in results:
        assert np.array_equal(got, want)
    # Every message paid its alpha: 2(n-1) data messages plus the barrier's two tokens.
    assert all(len(t.latency.overshoots_s) == 2 * (ranks - 1) + 2 for t in transports)

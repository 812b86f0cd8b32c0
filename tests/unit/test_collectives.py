import threading
import time

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


def test_a_barrier_of_one_job_among_others_stops_when_its_first_rank_says_so():
    """A job's barrier ring takes its ranks alone (1, 3, 5 of 6), and the first rank's `go`,
    asked once all have arrived, stops every rank of it."""
    from hosts.collectives import STOP

    transports = InProcessTransport.mesh(6)
    job = [1, 3, 5]
    asked = []
    starts = run_ranks([transports[r] for r in job],
                       lambda t: ring_barrier(t, job, tag=7, go=lambda: asked.append(t.rank)))
    assert starts == [STOP] * 3 and asked == [1]
    starts = run_ranks([transports[r] for r in job], lambda t: ring_barrier(t, job, tag=9, go=lambda: 0.0))
    assert len(set(starts)) == 1 and starts[0] > 0
    # An earliest start (jobs that start measuring together) holds every rank until then.
    later = time.monotonic() + 0.5
    starts = run_ranks([transports[r] for r in job], lambda t: ring_barrier(t, job, tag=11, go=lambda: later))
    assert starts == [later] * 3


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


from hosts.collectives import (  # noqa: E402
    alltoall,
    halving_doubling_allreduce,
    ring_allgather,
    ring_reduce_scatter,
    sendrecv,
    tree_allreduce,
    tree_broadcast,
)
from testbed.shared.collective_plans import chunk_bounds  # noqa: E402


@pytest.mark.parametrize("algorithm", [halving_doubling_allreduce, tree_allreduce])
@pytest.mark.parametrize("ranks", range(2, 10))
def test_other_allreduce_algorithms_are_exact(algorithm, ranks):
    elements = 1000 + ranks
    transports = InProcessTransport.mesh(ranks)

    def body(transport):
        data = gradient(5, 2, transport.rank, elements)
        algorithm(transport, list(range(ranks)), data)
        return data

    want = expected_sum(5, 2, ranks, elements)
    for got in run_ranks(transports, body):
        assert np.array_equal(got, want)


@pytest.mark.parametrize("ranks", range(2, 10))
def test_reduce_scatter_allgather_broadcast_alltoall_sendrecv(ranks):
    elements = 97 * ranks
    group = list(range(ranks))
    inputs = [gradient(9, 0, r, elements) for r in range(ranks)]
    total = np.sum(inputs, axis=0)
    bounds = chunk_bounds(elements, ranks)

    def body(t):
        pos = t.rank
        rs = inputs[pos].copy()
        ring_reduce_scatter(t, group, rs, tag_base=0)
        owned = bounds[(pos + 1) % ranks]
        ag = np.zeros(elements, dtype=np.float32)
        mine = bounds[pos]
        ag[mine[0]:mine[1]] = inputs[pos][mine[0]:mine[1]]
        ring_allgather(t, group, ag, tag_base=1000)
        bc = inputs[pos].copy() if pos == 2 % ranks else np.zeros(elements, dtype=np.float32)
        tree_broadcast(t, group, bc, root=2 % ranks, tag_base=2000)
        a2a = np.zeros(elements, dtype=np.float32)
        alltoall(t, group, inputs[pos], a2a, tag_base=3000)
        p2p = np.zeros(elements, dtype=np.float32)
        sendrecv(t, (pos + 1) % ranks, inputs[pos], (pos - 1) % ranks, p2p, tag=4000)
        return rs[owned[0]:owned[1]], ag, bc, a2a, p2p

    for pos, (rs, ag, bc, a2a, p2p) in enumerate(run_ranks(InProcessTransport.mesh(ranks), body)):
        owned = bounds[(pos + 1) % ranks]
        assert np.array_equal(rs, total[owned[0]:owned[1]])
        gathered = np.concatenate([inputs[r][a:b] for r, (a, b) in enumerate(bounds)])
        assert np.array_equal(ag, gathered)
        assert np.array_equal(bc, inputs[2 % ranks])
        a, b = bounds[pos]  # equal blocks: block `pos` of every sender, in sender order
        assert np.array_equal(a2a, np.concatenate([inputs[src][a:b] for src in range(ranks)]))
        assert np.array_equal(p2p, inputs[(pos - 1) % ranks])


@pytest.mark.parametrize("ranks", [2, 3, 5, 8])
def test_every_supported_collective_matches_its_numpy_expectation(ranks):
    from hosts import ops

    for (op, algorithm) in ops.ALGORITHMS:
        if algorithm in ops.SERVICE_ALGORITHMS or algorithm == "ina":
            continue  # CPU machines (tests/unit/test_byteps.py) or the aggregation node (test_ina.py)
        elements = ops.elements_for(op, 4 * (50 * ranks + 1), ranks)
        transports = InProcessTransport.mesh(ranks)

        def body(t):
            data = ops.make_input(op, 4, 1, t.rank, ranks, elements)
            result, _ = ops.run(op, algorithm, t, list(range(ranks)), data, tag_base=0)
            return result

        for pos, got in enumerate(run_ranks(transports, body)):
            assert np.array_equal(got, ops.expected(op, 4, 1, pos, ranks, elements)), (op, algorithm, pos)


@pytest.mark.parametrize("ranks", [2, 3, 5])
def test_reduce_gather_scatter_over_tcp_loopback(ranks):
    """Chakra's REDUCE, GATHER and SCATTER on real sockets, against numpy written out here: the
    root holds the sum / every rank's chunk; rank r holds chunk r of the root's buffer."""
    import socket

    from hosts.collectives import direct_gather, direct_scatter, tree_reduce_to_root

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transports = [TcpTransport(r, [f"127.0.0.{i + 1}" for i in range(ranks)], port, connect_timeout_s=10)
                  for r in range(ranks)]
    elements = 100_003
    inputs = [gradient(9, 2, r, elements) for r in range(ranks)]
    bounds = np.array_split(np.arange(elements), ranks)
    try:
        def body(t):
            group = list(range(ranks))
            reduced, _ = tree_reduce_to_root(t, group, inputs[t.rank].copy(), tag_base=100)
            own = np.zeros(elements, dtype=np.float32)
            own[bounds[t.rank]] = inputs[t.rank][bounds[t.rank]]
            direct_gather(t, group, own, tag_base=200)
            scattered = inputs[t.rank].copy()
            direct_scatter(t, group, scattered, tag_base=300)
            return reduced, own, scattered[bounds[t.rank]]

        results = run_ranks(transports, body)
    finally:
        for t in transports:
            t.close()
    total = np.sum(np.stack(inputs), axis=0, dtype=np.float32)
    assert np.allclose(results[0][0], total, rtol=1e-5)
    assert np.array_equal(results[0][1], np.concatenate([inputs[r][bounds[r]] for r in range(ranks)]))
    for rank, (reduced, _, chunk) in enumerate(results):
        assert np.array_equal(chunk, inputs[0][bounds[rank]])
        if rank:
            assert np.array_equal(reduced, inputs[rank])


@pytest.mark.parametrize("kind", ["elect-flat", "elect-cluster", "elect-fattree", "sip-ocs", "sip-ring", "ina"])
@pytest.mark.parametrize(("op", "algorithm"), [("alltoall", "ring"), ("broadcast", "tree")])
def test_all_to_all_and_broadcast_are_predicted_on_every_fabric(kind, op, algorithm):
    from testbed.planning.plan import check_scenario, predict_scenario
    from testbed.planning.scenario_file import parse_scenario
    extra = {"wavelengths": 4, "wavelength_gbps": 25} if kind == "sip-ring" else {}
    scenario = parse_scenario({"name": "x", "fabric": {"kind": kind, "hosts": 4, "gpu_bandwidth_gbps": 100,
                                                       "latency_us": 2, **extra},
                               "workload": {"kind": "collective", "collective": op, "algorithm": algorithm,
                                            "bytes": 4_000_000}}, "test")
    check_scenario(scenario)
    assert predict_scenario(scenario).iteration_time_s > 0


def test_an_all_to_all_on_circuits_takes_each_round_at_a_circuits_rate():
    """4 GPUs, 3 switches: every pair has one circuit of B/3; the all-to-all sends M/4 to each
    other GPU in 3 rounds: 3·(α + (M/4)/(B/3))."""
    from testbed.planning.plan import predict_scenario
    from testbed.planning.scenario_file import parse_scenario
    scenario = parse_scenario({"name": "x", "fabric": {"kind": "sip-ocs", "hosts": 4, "gpu_bandwidth_gbps": 100,
                                                       "latency_us": 2, "ocs_switches": 3},
                               "workload": {"kind": "collective", "collective": "alltoall", "bytes": 4_000_000}},
                              "test")
    expected = 3 * (2e-6 + 1_000_000 * 8 / (100e9 / 3))
    assert predict_scenario(scenario).iteration_time_s == pytest.approx(expected, rel=1e-9)

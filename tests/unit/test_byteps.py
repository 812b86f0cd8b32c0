"""BytePS and the classic parameter server: exact sums in-process, BytePS's load split (docs/byteps.md),
the schedule a scenario gets, and the oracle's figures."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hosts import byteps, ops
from hosts.transport import InProcessTransport
from testbed.model.errors import InputError
from testbed.network.collectives import ring_allreduce_time_s
from testbed.network.flow_model import nic_flow_model
from testbed.planning.plan import predict_scenario
from testbed.planning.scenario_file import parse_scenario
from testbed.workloads.all_kinds import schedule_for
from testbed.workloads.collective.byteps.oracle import Instance, simulate_instances

from .test_collectives import run_ranks


def scenario(kind="ps", hosts=4, cpus=None, algorithm="byteps", size=100_000_000, **fabric):
    spec = {"kind": kind, "hosts": hosts, "gpu_bandwidth_gbps": 100, "latency_us": 5, **fabric}
    if cpus is not None:
        spec["cpu_servers"] = cpus
    return parse_scenario({"name": "bp", "seed": 1, "fabric": spec,
                           "workload": {"kind": "collective", "collective": "allreduce", "algorithm": algorithm,
                                        "bytes": size}})


def run_in_process(n, k, classic, elements, chunks, seed=3):
    transports = InProcessTransport.mesh(n + k)

    def body(t):
        data = ops.make_input("allreduce", seed, 0, t.rank, n, elements) if t.rank < n else None
        result, _ = ops.run("allreduce", "ps" if classic else "byteps", t, list(range(n)), data, tag_base=0,
                            services=tuple(range(n, n + k)), chunks=chunks)
        return result

    return run_ranks(transports, body)


@pytest.mark.parametrize("n", range(2, 10))
def test_byteps_sums_are_exact_for_every_cpu_count(n):
    for k in sorted({0, 1, n // 2, n}):
        chunks = byteps.chunk_count(50_000_000, sum(byteps.service_buckets(n, k, False)))
        results = run_in_process(n, k, False, 997 + n, chunks)
        expected = ops.expected("allreduce", 3, 0, 0, n, 997 + n)
        for rank in range(n):
            assert np.array_equal(results[rank], expected), (n, k, rank)
        assert all(r is None for r in results[n:])


@pytest.mark.parametrize("n, k", [(2, 1), (4, 2), (5, 3), (9, 1)])
def test_classic_ps_sums_are_exact(n, k):
    chunks = byteps.chunk_count(50_000_000, k)
    results = run_in_process(n, k, True, 3001, chunks)
    for rank in range(n):
        assert np.array_equal(results[rank], ops.expected("allreduce", 3, 0, 0, n, 3001))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 24), data=st.data())
def test_load_split_is_the_optimal_one(n, data):
    """BytePS's split (docs/byteps.md): a CPU machine sums 2(n-1)/(n²+kn-2k)·M, a GPU machine (n-k)/(n²+kn-2k)·M, and
    every machine then sends and receives the same 2n(n-1)/(n²+kn-2k)·M."""
    k = data.draw(st.integers(0, n))
    total = n * n + k * n - 2 * k
    chunks = byteps.chunk_count(1e9, total)
    assert chunks % total == 0
    assert 1e9 / chunks <= byteps.MAX_CHUNK_BYTES
    owners = byteps.chunk_owners(n, k, False, chunks)
    for service in range(n + k):
        share = owners.count(service) / chunks
        assert share == pytest.approx((n - k) / total if service < n else 2 * (n - 1) / total)
    loads = byteps.node_loads(n, k, False, chunks)
    for value in loads.sent + loads.received:
        assert value == pytest.approx(2 * n * (n - 1) / total)


def test_chunks_are_small_enough_to_pipeline_and_large_enough_to_be_worth_a_message():
    # n = 4, k = 2: 20 buckets. 32 MB and 100 MB: 10 chunks per bucket (1.6 MB and 5 MB per bucket,
    # both above 10 × 128 kB); 1 MB: one chunk per bucket (50 kB each is below 128 kB already);
    # 1 GB: 13 per bucket, as chunks of at most 4 MB need (1e9 / (20 × 4e6) = 12.5).
    assert [byteps.chunk_count(m, 20) for m in (32e6, 100e6, 1e6, 1e9)] == [200, 200, 20, 260]


def test_consecutive_chunks_go_to_different_services():
    owners = byteps.chunk_owners(4, 2, False, 40)
    assert all(a != b for a, b in zip(owners, owners[1:]))
    assert byteps.push_window(owners) == 6


@pytest.mark.parametrize("n, k, classic, message", [
    (4, 5, False, "at most as many CPU machines"),
    (4, 0, True, "at least one CPU machine"),
])
def test_impossible_splits_are_refused(n, k, classic, message):
    with pytest.raises(byteps.PartitionError, match=message):
        byteps.service_buckets(n, k, classic)


def test_schedule_has_cpu_ranks_after_the_gpus_and_a_matching_traffic_matrix():
    sc = scenario(cpus=2)
    schedule = schedule_for(sc)
    assert schedule.hosts == 6
    step = schedule.gpus[5].steps[0]
    assert step.group == (0, 1, 2, 3) and step.services == (4, 5) and step.chunks == 200
    matrix = np.array(schedule.traffic_matrix_bytes, dtype=float)
    # Every machine sends and receives 2n(n-1)/(n²+kn-2k)·M = 1.2 M.
    assert np.allclose(matrix.sum(axis=0), 1.2e8, rtol=1e-6)
    assert np.allclose(matrix.sum(axis=1), 1.2e8, rtol=1e-6)
    assert matrix[4, 5] == 0  # CPU machines never talk to each other


def test_elect_cluster_runs_one_instance_per_gpu_slot_between_servers():
    sc = scenario(kind="elect-cluster", hosts=8, gpus_per_server=4, server_uplink_gbps=200)
    schedule = schedule_for(sc)
    assert schedule.hosts == 8
    kinds = [s.kind for s in schedule.gpus[1].steps]
    assert kinds == ["compute", "collective", "compute"]
    assert schedule.gpus[1].steps[1].group == (1, 5)
    assert schedule.gpus[1].steps[1].bytes == 25_000_000
    prediction = predict_scenario(sc)
    assert prediction.breakdown.compute_s > 0 and prediction.breakdown.communication_s > 0


@pytest.mark.parametrize("spec, message", [
    (dict(kind="elect-flat", algorithm="ps"), "at least one CPU machine"),
    (dict(kind="ps", cpus=5), "at most as many CPU machines"),
    (dict(kind="sip-ring", wavelengths=4), "runs on elect-flat, elect-cluster, ps"),
    (dict(kind="elect-cluster", hosts=12, gpus_per_server=8), "at least two full servers"),
])
def test_bad_byteps_scenarios_get_one_clear_sentence(spec, message):
    with pytest.raises(InputError, match=message):
        schedule_for(scenario(**spec))


def test_oracle_byteps_without_cpus_is_close_to_ring_allreduce():
    sc = scenario(kind="elect-flat", hosts=4)
    predicted = predict_scenario(sc).iteration_time_s
    ring = ring_allreduce_time_s(4, 1e8, 100e9, 5e-6)
    assert ring <= predicted <= 1.05 * ring  # the same bytes per link, plus the pipeline's tail


def test_oracle_sums_to_a_worker_pay_alpha_once_not_per_chunk():
    # n = 2, k = 0, 4 chunks of M/4: chunks 0, 2 belong to machine 0 and 1, 3 to machine 1. Each
    # worker pushes its two foreign chunks at once (alpha, then M/2 at B), then the owner sends
    # both sums back on one connection: the second's alpha passes while the first is on the wire.
    # By hand: alpha + 4 Mb/B + alpha + 4 Mb/B = 2 alpha + 8M/B, BytePS's bound plus its alpha terms.
    size, rate, alpha = 1e6, 100e9, 5e-6
    instance = Instance(group=(0, 1), services=(), size_bytes=size, chunks=4, classic=False)
    assert simulate_instances([instance], nic_flow_model(rate, 2), alpha) == pytest.approx(2 * alpha + 8 * size / rate)


@pytest.mark.parametrize("size", [32_000_000, 100_000_000])
def test_oracle_byteps_is_within_ten_percent_of_its_bound(size):
    # BytePS's split at n = 4, k = 2: every machine moves 2·4·3/(16 + 8 - 4) = 1.2 M each way at
    # 100 Gb/s, plus alpha (5 us) for the push and for the sum: 3.082 ms at 32 MB, 9.610 ms at 100 MB.
    bound_s = 1.2 * size * 8 / 100e9 + 2 * 5e-6
    sc = scenario(cpus=2, size=size)
    predicted = predict_scenario(sc).iteration_time_s
    assert bound_s <= predicted <= 1.10 * bound_s


def test_oracle_more_cpu_machines_is_never_slower():
    times = [predict_scenario(sc).iteration_time_s for sc in (scenario(cpus=c) for c in (0, 2, 4))]
    assert times[0] >= times[1] >= times[2]
    assert times[2] < 0.8 * times[0]  # k = n moves a quarter less data per machine at n = 4


def test_a_huge_buffer_takes_larger_chunks_not_more_of_them():
    from testbed.shared.byteps_partition import chunk_count

    # 20 buckets (n = 4, k = 2): 100 MB is ten 0.5 MB chunks a bucket; a terabyte caps at 1,000 a
    # bucket (50 MB chunks) instead of 12,500 of 4 MB.
    assert chunk_count(100_000_000, 20) == 20 * 10
    assert chunk_count(10**12, 20) == 20 * 1000

"""INA: protocol, pipeline stages, quantization, end-host fallback (pure), and the real node
program with real clients over loopback, with injected loss, two jobs and malformed packets."""

from __future__ import annotations

import socket

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scapy.all import IP, UDP, fuzz, raw

from hosts.ina import quantize as q
from hosts.ina.deparser import encode
from hosts.ina.fallback import EndHostAggregator
from hosts.ina.parser import Drop, Header, parse
from hosts.ina.pipeline import Pipeline
from hosts.ina.protocol import (
    DATA_PORT,
    ELEMENTS_PER_PACKET,
    FALLBACK,
    FLUSH,
    HEADER,
    HEADER_BYTES,
    INA,
    INT,
    MAX,
    OVERFLOW,
    RESULT,
    RETRANSMIT,
)
from hosts.ina.tables import RegistrationError, Tables
from tests.unit.ina_loopback import NODE, loopback_node, run_jobs, worker_address

WORKERS = tuple(f"10.0.0.{i + 1}" for i in range(4))


def packet(job=1, worker=0, flags=INT, slot=0, ver=0, exp=0, seq=0, low_seq=0, values=(1, 2, 3)) -> bytes:
    values = np.asarray(values, dtype=np.int32)
    return encode(Header(job, worker, flags, slot, ver, exp, seq, low_seq, 1 << worker, values.size), values)


def decode(out):
    data, destination = out
    header = Header(*HEADER.unpack_from(data))
    values = np.frombuffer(data, dtype=">i4", offset=HEADER_BYTES)
    return header, values, destination


# --- protocol -------------------------------------------------------------------------------

@given(job=st.integers(0, 65535), worker=st.integers(0, 63), flags=st.integers(0, 127), slot=st.integers(0, 65535),
       ver=st.integers(0, 1), exp=st.integers(-128, 127), seq=st.integers(0, 2**32 - 1),
       values=st.lists(st.integers(-2**31, 2**31 - 1), max_size=ELEMENTS_PER_PACKET))
@settings(max_examples=200, deadline=None)
def test_struct_codec_and_scapy_layer_agree(job, worker, flags, slot, ver, exp, seq, values):
    header = Header(job, worker, flags, slot, ver, exp, seq, 7, 1 << worker, len(values))
    data = encode(header, np.array(values, dtype=np.int32))
    decoded = INA(data)
    assert [decoded.job, decoded.worker, int(decoded.flags), decoded.slot, decoded.ver, decoded.exp, decoded.seq,
            decoded.low_seq, decoded.bitmap, decoded.count] == list(header)
    assert list(decoded.values) == values
    assert raw(decoded) == data


def test_capture_decodes_through_udp():
    frame = IP(raw(IP(dst="10.0.0.9") / UDP(sport=DATA_PORT, dport=DATA_PORT) / packet(values=[5, -6])))
    assert frame[INA].values == [5, -6] and frame[INA].job == 1


# --- tables and parser -------------------------------------------------------------------------

def test_registration_is_idempotent_and_refuses_conflicts_and_full_pools():
    tables = Tables(pool_slots=32, sharing="reserved")
    a = tables.register(1, list(WORKERS), 16)
    assert tables.register(1, list(WORKERS), 16) == a
    b = tables.register(2, ["10.0.1.1", "10.0.1.2"], 16)
    assert (a.slot_base, b.slot_base) == (0, 16)
    with pytest.raises(RegistrationError, match="already registered"):
        tables.register(1, ["10.0.9.9"], 16)
    with pytest.raises(RegistrationError, match="0 free slots"):
        tables.register(3, ["10.0.2.1"], 1)


@pytest.mark.parametrize("data, reason", [
    (b"\x00" * 10, "truncated"),
    (packet()[:-2], "length_mismatch"),
    (packet() + b"\x00\x00\x00\x00", "length_mismatch"),
    (packet(ver=2), "bad_version"),
    (packet(flags=RESULT), "result_from_worker"),
])
def test_parser_drops_malformed(data, reason):
    with pytest.raises(Drop) as drop:
        parse(data)
    assert drop.value.reason == reason


def test_unknown_job_worker_and_slot_are_dropped_and_counted():
    pipe = Pipeline(64, "reserved")
    pipe.tables.register(1, list(WORKERS), 8)
    assert pipe.process(packet(job=9), WORKERS[0]) == []
    assert pipe.process(packet(worker=1), WORKERS[0]) == []  # worker 1's id from worker 0's address
    assert pipe.process(packet(slot=8), WORKERS[0]) == []
    assert {k: v for k, v in pipe.counters.items() if k.startswith("dropped")} == {
        "dropped_unknown_job": 1, "dropped_unknown_worker": 1, "dropped_slot_out_of_range": 1}


# --- reserved slots (SwitchML) ------------------------------------------------------------------

def test_reserved_slot_sums_once_multicasts_and_answers_retransmissions():
    pipe = Pipeline(8, "reserved")
    pipe.tables.register(1, list(WORKERS), 4)
    for w in range(3):
        assert pipe.process(packet(worker=w, values=[w, 10 * w]), WORKERS[w]) == []
    assert pipe.process(packet(worker=0, flags=INT | RETRANSMIT, values=[0, 0]), WORKERS[0]) == []  # not summed twice
    outs = pipe.process(packet(worker=3, values=[3, 30]), WORKERS[3])
    assert [o[1][0] for o in outs] == list(WORKERS)
    header, values, _ = decode(outs[0])
    assert header.flags & RESULT and list(values) == [6, 60] and header.bitmap == 0b1111
    again = pipe.process(packet(worker=2, flags=INT | RETRANSMIT, values=[2, 20]), WORKERS[2])
    assert len(again) == 1 and again[0][1][0] == WORKERS[2] and list(decode(again[0])[1]) == [6, 60]


def test_shadow_copy_keeps_the_previous_result_while_the_next_use_fills():
    pipe = Pipeline(2, "reserved")
    pipe.tables.register(1, WORKERS[:2], 1)  # window 1: seq 0 → copy 0, seq 1 → copy 1, seq 2 → copy 0
    for w in range(2):
        pipe.process(packet(worker=w, seq=0, ver=0, values=[1]), WORKERS[w])
    pipe.process(packet(worker=0, seq=1, ver=1, values=[5]), WORKERS[0])
    # worker 1 lost seq 0's result: copy 0 still holds it
    resent = pipe.process(packet(worker=1, seq=0, ver=0, flags=INT | RETRANSMIT, values=[1]), WORKERS[1])
    assert list(decode(resent[0])[1]) == [2]
    done = pipe.process(packet(worker=1, seq=1, ver=1, values=[6]), WORKERS[1])
    assert list(decode(done[0])[1]) == [11]
    for w in range(2):  # copy 0 reused for seq 2: overwritten, not added to seq 0's sum
        out = pipe.process(packet(worker=w, seq=2, ver=0, values=[100]), WORKERS[w])
    assert list(decode(out[0])[1]) == [200]


def test_a_sum_completed_by_a_retransmission_is_flagged_so_nobody_times_it():
    pipe = Pipeline(2, "reserved")
    pipe.tables.register(1, WORKERS[:2], 1)
    pipe.process(packet(worker=0, seq=0, values=[1]), WORKERS[0])
    late = pipe.process(packet(worker=1, seq=0, flags=INT | RETRANSMIT, values=[2]), WORKERS[1])
    assert decode(late[0])[0].flags & RETRANSMIT
    for w in range(2):  # the copy's next use starts clean
        on_time = pipe.process(packet(worker=w, seq=1, ver=1, values=[1]), WORKERS[w])
    assert not decode(on_time[0])[0].flags & RETRANSMIT


def test_overflow_and_max_are_flagged_and_computed():
    pipe = Pipeline(4, "reserved")
    pipe.tables.register(1, WORKERS[:2], 2)
    for w in range(2):
        out = pipe.process(packet(worker=w, values=[2**31 - 1]), WORKERS[w])
    assert decode(out[0])[0].flags & OVERFLOW
    for w, v in enumerate([3, -7]):
        out = pipe.process(packet(worker=w, slot=1, flags=MAX, values=[v, v]), WORKERS[w])
    assert list(decode(out[0])[1]) == [3, 3]


# --- shared slots (ATP) and the end-host fallback --------------------------------------------------

def test_shared_collision_goes_to_fallback_and_fallback_completes_once():
    pipe = Pipeline(1, "shared")
    pipe.tables.register(1, WORKERS[:2], 1)
    pipe.tables.register(2, ["10.0.1.1", "10.0.1.2"], 1)
    assert pipe.process(packet(job=1, worker=0, seq=0, values=[1]), WORKERS[0]) == []  # job 1 holds the slot
    out = pipe.process(packet(job=2, worker=0, seq=0, values=[7]), "10.0.1.1")  # collision
    assert len(out) == 1 and out[0][1] == ("10.0.1.1", 47472) and pipe.counters["collisions"] == 1
    aggregator = EndHostAggregator(2, ("10.0.1.1", "10.0.1.2"))
    header, values = parse_piece(out[0][0])
    assert aggregator.piece(header, values) == []
    other = pipe.process(packet(job=2, worker=1, seq=0, values=[8]), "10.0.1.2")
    results = aggregator.piece(*parse_piece(other[0][0]))
    assert len(results) == 2 and list(decode(results[0])[1]) == [15]
    again = aggregator.piece(*parse_piece(other[0][0]))  # asked again: the result, not a second sum
    assert len(again) == 1 and again[0][1][0] == "10.0.1.2" and list(decode(again[0])[1]) == [15]


def test_shared_retransmission_flushes_the_partial_to_fallback():
    pipe = Pipeline(4, "shared")
    pipe.tables.register(1, WORKERS[:3], 2)
    slot = 1
    pipe.process(packet(worker=0, slot=slot, values=[1]), WORKERS[0])
    pipe.process(packet(worker=1, slot=slot, values=[2]), WORKERS[1])
    out = pipe.process(packet(worker=2, slot=slot, flags=INT | RETRANSMIT, values=[4]), WORKERS[2])
    assert pipe.counters["flushes"] == 1 and len(out) == 2
    aggregator = EndHostAggregator(1, WORKERS[:3])
    flush = parse_piece(out[0][0])
    assert flush[0].flags & FLUSH and flush[0].bitmap == 0b011
    assert aggregator.piece(*flush) == []
    results = aggregator.piece(*parse_piece(out[1][0]))
    assert list(decode(results[0])[1]) == [7]


def parse_piece(data: bytes):
    header = Header(*HEADER.unpack_from(data))
    assert header.flags & FALLBACK
    return header, np.frombuffer(data, dtype=">i4", offset=HEADER_BYTES).astype(np.int32)


# --- quantization ----------------------------------------------------------------------------

@given(st.integers(2, 64), arrays(np.float32, st.integers(1, 2000),
                                  elements=st.floats(-1e6, 1e6, width=32, allow_subnormal=False)))
@settings(max_examples=150, deadline=None)
def test_quantized_sum_is_within_the_stated_bound(workers, base):
    inputs = [base * (1 + 0.01 * w) for w in range(workers)]
    exps = np.max([q.chunk_exponents(x, ELEMENTS_PER_PACKET) for x in inputs], axis=0)
    total = np.sum([q.quantize(x, exps, workers, ELEMENTS_PER_PACKET).astype(np.int64) for x in inputs], axis=0)
    assert np.abs(total).max() < 2**31  # never overflows int32
    result = q.dequantize(total, exps, workers, ELEMENTS_PER_PACKET)
    exact = np.sum([x.astype(np.float64) for x in inputs], axis=0)
    bound = q.error_bound(exps, workers, ELEMENTS_PER_PACKET, base.size)
    # plus float32 rounding of the result itself
    assert np.all(np.abs(result - exact) <= bound + np.abs(exact) * 2**-23 + 1e-30)


def test_integer_valued_gradients_are_exact():
    data = np.arange(-1000, 1000, dtype=np.float32)
    exps = q.chunk_exponents(data, ELEMENTS_PER_PACKET)
    assert np.array_equal(q.dequantize(q.quantize(data, exps, 8, ELEMENTS_PER_PACKET).astype(np.int64),
                                       exps, 8, ELEMENTS_PER_PACKET), data)


def test_non_finite_input_is_refused():
    with pytest.raises(q.QuantizationError):
        q.chunk_exponents(np.array([1.0, np.nan], dtype=np.float32), ELEMENTS_PER_PACKET)


# --- fuzzing the pure pipeline -----------------------------------------------------------------

def test_fuzzed_packets_never_crash_the_pipeline_and_sums_stay_exact():
    pipe = Pipeline(16, "reserved", seed=0)
    pipe.tables.register(1, WORKERS[:2], 4)
    rng = np.random.default_rng(0)
    cases = 0
    for round_ in range(20):
        for _ in range(150):  # scapy fuzzing of every header field, random lengths and payloads
            data = raw(fuzz(INA()))[: int(rng.integers(0, 1600))]
            pipe.process(data, WORKERS[int(rng.integers(0, 2))] if rng.random() < 0.5 else "10.9.9.9")
            cases += 1
        a, b = rng.integers(-1000, 1000, 50), rng.integers(-1000, 1000, 50)
        seq = 1000 + round_  # fuzz may have touched slots; a fresh sequence on copy (seq // 4) % 2
        slot, ver = seq % 4, (seq // 4) % 2
        for _ in range(2):  # fresh use: each worker's packet, twice so stale fuzz bits are cleared
            pipe.process(packet(worker=0, seq=seq, slot=slot, ver=1 - ver, values=a), WORKERS[0])
            pipe.process(packet(worker=1, seq=seq, slot=slot, ver=1 - ver, values=b), WORKERS[1])
        pipe.process(packet(worker=0, seq=seq, slot=slot, ver=ver, values=a), WORKERS[0])
        out = pipe.process(packet(worker=1, seq=seq, slot=slot, ver=ver, values=b), WORKERS[1])
        assert out and np.array_equal(decode(out[0])[1], a + b)
    assert cases == 3000 and pipe.drops() > 0


# --- the real node program over loopback ---------------------------------------------------------

@pytest.mark.parametrize("sharing", ["reserved", "shared"])
@pytest.mark.parametrize("drop_frac", [0.0, 0.01, 0.05])
def test_node_allreduce_is_exact_with_loss(tmp_path, sharing, drop_frac):
    rng = np.random.default_rng(int(drop_frac * 100))
    n = 4
    ints = [rng.integers(-10**6, 10**6, 20000).astype(np.int32) for _ in range(n)]
    floats = [rng.standard_normal(20000).astype(np.float32) * 10 for _ in range(n)]
    with loopback_node(tmp_path, sharing=sharing, drop_frac=drop_frac) as report:
        results = run_jobs({1: [[ints[w], floats[w]] for w in range(n)]})
    exact_int = np.sum(ints, axis=0)
    exact_float = np.sum([f.astype(np.float64) for f in floats], axis=0)
    exps = np.max([q.chunk_exponents(f, ELEMENTS_PER_PACKET) for f in floats], axis=0)
    bound = q.error_bound(exps, n, ELEMENTS_PER_PACKET, exact_float.size) + np.abs(exact_float) * 2**-23
    for w in range(n):
        got_int, got_float = results[1][w]
        assert np.array_equal(got_int, exact_int)
        assert np.all(np.abs(got_float - exact_float) <= bound)
    if drop_frac:
        assert report["counters"]["injected_drops"] > 0


def test_two_concurrent_jobs_never_see_each_others_sums(tmp_path):
    rng = np.random.default_rng(5)
    jobs = {1: [[rng.integers(-100, 100, 30000).astype(np.int32)] for _ in range(3)],
            2: [[rng.integers(10**5, 10**6, 30000).astype(np.int32)] for _ in range(3)]}
    with loopback_node(tmp_path, pool_slots=24, sharing="shared", drop_frac=0.01) as report:
        results = run_jobs(jobs, window=8)
    for job, workers in jobs.items():
        exact = np.sum([w[0] for w in workers], axis=0)
        assert all(np.array_equal(results[job][w][0], exact) for w in range(3))
    assert report["counters"].get("collisions", 0) > 0  # the jobs did share slots


def test_node_keeps_serving_through_malformed_packets(tmp_path):
    """A fuzzer sends scapy-fuzzed INA packets, truncated packets and packets for unknown jobs
    and slots at the node while a job all-reduces: all are dropped and counted, sums stay exact,
    and the node serves the next job."""
    import threading

    rng = np.random.default_rng(9)
    data = [[rng.integers(-1000, 1000, 40000).astype(np.int32) for _ in range(4)] for _ in range(3)]
    sent = [0]

    def fuzzer():
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.5.5", 0))
        while sent[0] < FUZZ_PACKETS:
            for bad in (raw(fuzz(INA())), packet()[:7], packet(job=77), packet(slot=60000), packet()[:-3]):
                sock.sendto(bad, (NODE, DATA_PORT))
                sent[0] += 1
        sock.close()

    with loopback_node(tmp_path, sharing="reserved") as report:
        thread = threading.Thread(target=fuzzer)
        thread.start()
        try:
            results = run_jobs({1: data})
        finally:
            thread.join()
        after = run_jobs({2: [d[:1] for d in data]})
    for call in range(4):
        exact = np.sum([d[call] for d in data], axis=0)
        assert all(np.array_equal(results[1][w][call], exact) for w in range(3))
    assert all(np.array_equal(after[2][w][0], np.sum([d[0] for d in data], axis=0)) for w in range(3))
    counters = report["counters"]
    assert sum(v for k, v in counters.items() if k.startswith("dropped_")) == sent[0]
    for reason in ("truncated", "unknown_job", "length_mismatch", "unknown_worker"):
        assert counters.get(f"dropped_{reason}", 0) > 0, reason


FUZZ_PACKETS = 3000


def test_addresses_outside_the_job_cannot_write_its_slots(tmp_path):
    """Isolation: packets naming a job's id and worker from another address never reach its slots."""
    with loopback_node(tmp_path) as report:
        intruder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        intruder.bind((worker_address(3, 0), 0))
        for seq in range(16):  # poison every slot the job is about to use
            intruder.sendto(packet(job=1, worker=0, seq=seq, slot=seq, values=[999] * 100), (NODE, DATA_PORT))
        results = run_jobs({1: [[np.full(100, w + 1, dtype=np.int32)] for w in range(2)]})
        intruder.close()
    assert np.array_equal(results[1][0][0], np.full(100, 3))
    assert report["counters"].get("dropped_unknown_job", 0) + report["counters"].get("dropped_unknown_worker", 0) == 16


# --- scenario, schedule, topology and oracle of the ina fabric ----------------------------------

def ina_scenario(**changes):
    from testbed.planning.overrides import apply_overrides
    from testbed.planning.scenario_file import load_scenario
    from tests.conftest import ROOT

    return apply_overrides(load_scenario(ROOT / "scenarios" / "ina-two-jobs.yaml"), changes)


@pytest.mark.parametrize("changes, words", [
    ({"fabric.slots": 8}, "raise slots to at least 16"),
    ({"fabric.workers_per_job": 3}, "must divide hosts"),
    ({"workload.collective": "allgather"}, "not supported"),
])
def test_bad_ina_scenarios_are_refused_with_the_fix(changes, words):
    from testbed.model.errors import InputError
    from testbed.workloads.all_kinds import schedule_for

    with pytest.raises((InputError, ValueError), match=words):
        schedule_for(ina_scenario(**changes))


def test_algorithm_ina_needs_the_ina_fabric():
    from testbed.model.errors import InputError
    from testbed.planning.overrides import apply_overrides
    from testbed.planning.scenario_file import load_scenario
    from testbed.workloads.all_kinds import schedule_for
    from tests.conftest import ROOT

    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "quickstart.yaml"), {"workload.algorithm": "ina"})
    with pytest.raises(InputError, match="set fabric.kind to ina"):
        schedule_for(scenario)


def test_jobs_are_groups_and_the_node_owns_a_port_per_gpu():
    from testbed.fabrics.ina.node_links import ina_host_commands
    from testbed.fabrics.topology import build_topology
    from testbed.workloads.all_kinds import schedule_for

    scenario = ina_scenario(**{"fabric.link_loss_frac": 0.02})
    schedule = schedule_for(scenario)
    assert {tuple(g.steps[0].group) for g in schedule.gpus} == {(0, 1, 2, 3), (4, 5, 6, 7)}
    assert not any(any(row) for row in schedule.traffic_matrix_bytes)  # nothing flows GPU to GPU
    topology = build_topology(scenario.fabric, "abcd", 1e8, "user")
    assert topology.switches == () and topology.hosts[-1].role == "aggregator"
    assert len(topology.hosts[-1].interfaces) == 8
    commands = ina_host_commands(topology, 0.02)
    assert any("statistic --mode random --probability 0.020000" in c for c in commands["h9"])
    assert any(c.startswith("ip neigh replace 10.0.0.2") for c in commands["h1"])


def test_oracle_ina_against_ring_tends_to_n_over_2_n_minus_1():
    from testbed.network.collectives import collective_cost, ina_allreduce_cost

    for n in (4, 8, 64):
        ina = ina_allreduce_cost(n, 1e9, 100e9, 0.0).time_s
        ring = collective_cost("allreduce", "ring", n, 1e9, 100e9, 0.0).time_s
        assert abs(ina / ring / (n / (2 * (n - 1))) - 1) < 0.02
    shared = ina_allreduce_cost(4, 1e9, 100e9, 0.0, collision_frac=0.1).time_s
    assert shared == pytest.approx(ina_allreduce_cost(4, 1e9, 100e9, 0.0).time_s * 1.3)


def test_auto_rate_follows_the_calibrated_node_rate():
    from dataclasses import replace

    from testbed.core.calibration import DEFAULT_CALIBRATION
    from testbed.fabrics.ina.node_links import max_worker_rate_bps
    from testbed.planning.overrides import apply_overrides
    from testbed.planning.plan import prepare
    from testbed.planning.scenario_file import load_scenario
    from tests.conftest import ROOT

    # By hand: 0.45 of 45,000 packets/s sustained, 0.3 of that used: 6,075 packets/s of
    # 1,508-byte frames (12,064 bits) over 4 workers is 18.32 Mb/s each; a node measured at a
    # tenth of that rate (a slow VM) gets a tenth of the rate.
    assert max_worker_rate_bps(4, 45_000) == pytest.approx(18.32e6, rel=1e-3)
    assert max_worker_rate_bps(4, 4_500) == pytest.approx(1.832e6, rel=1e-3)
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "ina-allreduce.yaml"), {"fabric.hosts": 4})
    fast = replace(DEFAULT_CALIBRATION, measured=True, capacity_bps=2e9, ina_node_packets_per_s=45_000)
    slow = replace(fast, ina_node_packets_per_s=4_500)
    assert prepare(scenario, fast).plan.host_rate_bps <= 18.32e6 * 1.001
    assert prepare(scenario, slow).plan.host_rate_bps <= 1.832e6 * 1.001
    assert prepare(scenario, slow).ina_node_packets_per_s == 4_500


def test_a_chunk_that_collided_is_never_split_between_its_slot_and_the_end_host():
    """Job 2's chunk 0 collides with job 1's; job 3's chunk then collides on the same slot; job 1
    moves on and its slot frees. Job 2's second packet must still follow the first to the end
    host (an earlier node remembered only the slot's last collider and summed it in the freed
    slot: neither place ever had both, and the chunk waited for a retransmission timeout)."""
    pipe = Pipeline(2, "shared")
    pipe.tables.register(1, WORKERS[:1], 1)
    pipe.tables.register(2, ["10.0.1.1", "10.0.1.2"], 1)
    pipe.tables.register(3, ["10.0.2.1", "10.0.2.2"], 1)
    pipe.process(packet(job=1, worker=0, seq=0, values=[1]), WORKERS[0])  # job 1 (one worker) done
    pipe.process(packet(job=2, worker=0, seq=0, values=[7]), "10.0.1.1")  # collides
    pipe.process(packet(job=3, worker=0, seq=0, values=[5]), "10.0.2.1")  # collides too
    # Job 1's next chunk (in the other slot) says it is past chunk 0: slot 0 is free again.
    pipe.process(packet(job=1, worker=0, seq=1, slot=1, low_seq=1, values=[1]), WORKERS[0])
    out = pipe.process(packet(job=2, worker=1, seq=0, values=[8]), "10.0.1.2")
    assert len(out) == 1 and out[0][1] == ("10.0.1.1", 47472)
    assert pipe.counters["collisions"] == 2 and pipe.counters["collisions_followed"] == 1
    assert pipe.registers.spilled == {(3, 0): 0b01}  # job 2's chunk forgotten: both its packets went


def test_a_window_of_one_chunk_sends_every_other_frame_time():
    """fabric.slots 1 leaves the one job of 8 workers a window of one chunk: each chunk goes up,
    and only once its result is back (one frame time later) may the next one leave, so the wire
    takes twice as long as with a full window: 2α + 2·W/B, W the frames' bytes (one 1,514-byte
    frame per 360 float32, plus one per 360 chunks' exponents, at 1514/1448 of the payload rate).
    2 slots are a window of 2, which keeps the link busy: 2α + W/B, as 512 slots."""
    import math
    from dataclasses import replace

    from testbed.core.calibration import DEFAULT_CALIBRATION
    from testbed.planning.overrides import apply_overrides
    from testbed.planning.plan import prepare
    from testbed.planning.scenario_file import load_scenario
    from testbed.shared.ina_rules import ELEMENTS_PER_PACKET, FRAME_BYTES, PAYLOAD_BYTES
    from tests.conftest import ROOT
    size = 100_000_000
    chunks = math.ceil(size / PAYLOAD_BYTES)
    wire_s = (chunks + math.ceil(chunks / ELEMENTS_PER_PACKET)) * FRAME_BYTES * 1448 / 1514 * 8 / 100e9
    base = load_scenario(ROOT / "scenarios" / "ina-allreduce.yaml")
    def predicted(slots: int) -> float:
        return prepare(apply_overrides(base, {"fabric.slots": slots})).prediction.iteration_time_s
    assert predicted(1) == pytest.approx(2 * 5e-6 + 2 * wire_s, rel=1e-9)
    assert predicted(2) == predicted(512) == pytest.approx(2 * 5e-6 + wire_s, rel=1e-9)
    # The run keeps the node program's 2·8 packets a chunk (0.45 of 45,000 packets/s sustained:
    # 0.79 ms) to 5% of the chunk's two 12,064-bit frames: 1.527 Mb/s a worker, where full windows
    # allow 0.3 of the sustained rate over 8 workers, 9.16 Mb/s; its links carry half of that rate.
    calibration = replace(DEFAULT_CALIBRATION, measured=True, capacity_bps=2e9, ina_node_packets_per_s=45_000)
    one = prepare(apply_overrides(base, {"fabric.slots": 1}), calibration)
    full = prepare(base, calibration)
    assert one.plan.host_rate_bps <= 1.527e6 * 1.001 and full.plan.host_rate_bps <= 9.16e6 * 1.001
    assert one.expected_rate_bps == pytest.approx(one.plan.host_rate_bps * full.expected_rate_bps
                                                  / full.plan.host_rate_bps / 2, rel=1e-9)

"""Chakra execution traces: the framing byte for byte, DAG semantics timed by hand, every kind of
bad trace refused with one sentence naming file, node and field, fuzzed files, and export then
import of every shipped scenario that can be exported giving the same prediction."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbed.model.errors import InputError
from testbed.oracle.schedule_sim import simulate_schedule
from testbed.planning.scenario_file import load_scenario, make_fabric
from testbed.workloads.all_kinds import schedule_for
from testbed.workloads.chakra.export import export_chakra
from testbed.workloads.chakra.load import chakra_schedule, load_chakra
from testbed.workloads.chakra.proto import COLLECTIVES, NODE_TYPES, GlobalMetadata, Node, attribute, decode, encode

from ..conftest import ROOT

FLAT = make_fabric(kind="elect-flat", hosts=2, gpu_bandwidth_gbps=80, latency_us=1)


def node(ident: int, kind: str, deps=(), duration_us: int = 0, **attrs) -> Node:
    made = Node(id=ident, name=f"n{ident}", type=NODE_TYPES[kind], duration_micros=duration_us)
    made.data_deps.extend(deps)
    for key, value in attrs.items():
        made.attr.append(attribute(key, value))
    return made


def traces(*ranks, metadata=None):
    return [(f"t.{r}.et", metadata or GlobalMetadata(version="0.0.4"), nodes) for r, nodes in enumerate(ranks)]


def predict_us(schedule, fabric=FLAT) -> float:
    return simulate_schedule(schedule, fabric).iteration_time_s * 1e6


def test_framing_matches_the_wire_format_by_hand():
    # GlobalMetadata{version: "1"}: field 1, wire type 2 -> tag 0x0A, length 1, '1' = 0x31;
    # framed by its length, 3, as a varint.
    assert encode(GlobalMetadata(version="1"), []) == bytes([0x03, 0x0A, 0x01, 0x31])
    # A 300-byte name makes a Node longer than 127 bytes, so its length takes a two-byte varint.
    big = Node(id=1, name="x" * 300)
    body = big.SerializeToString()
    assert len(body) == 2 + 1 + 2 + 300  # id (0x08 0x01), name tag, varint 300 (0xAC 0x02), bytes
    framed = encode(GlobalMetadata(), [big])
    # empty metadata (length 0), then 305 = 0b10_0110001: 0x31 with the continuation bit, then 0x02
    assert framed[:3] == bytes([0x00, 0xB1, 0x02])
    metadata, nodes = decode(framed, "f")
    assert nodes[0].name == "x" * 300


def test_a_compute_ready_first_runs_first_and_a_receive_waits_beside_it():
    """Rank 1 lists recv, then b (needs the recv), then a (needs nothing). a starts at once and
    holds the GPU for 300 µs; the 1 MB message lands at 100 + 100 + 1 µs (compute, 1 MB at 80
    Gb/s, α); b runs after a: 300..350 µs. In list order it would end at 551 µs."""
    sender = [node(1, "COMP_NODE", duration_us=100),
              node(2, "COMM_SEND_NODE", [1], comm_src=0, comm_dst=1, comm_size=1_000_000, comm_tag=7)]
    receiver = [node(1, "COMM_RECV_NODE", comm_src=0, comm_dst=1, comm_size=1_000_000, comm_tag=7),
                node(2, "COMP_NODE", [1], duration_us=50),
                node(3, "COMP_NODE", duration_us=300)]
    schedule = chakra_schedule(traces(sender, receiver), 2, 1)
    assert schedule.execution == "dag"
    assert predict_us(schedule) == pytest.approx(350, abs=0.01)
    receiver[2].duration_micros = 150  # a ends before the message lands: b runs 201..251 µs
    assert predict_us(chakra_schedule(traces(sender, receiver), 2, 1)) == pytest.approx(251, abs=0.01)


def test_skipped_nodes_pass_their_dependencies_on_and_are_counted():
    rank = [node(1, "COMP_NODE", duration_us=10), node(2, "METADATA_NODE", [1]), node(3, "MEM_LOAD_NODE", [2]),
            node(4, "COMP_NODE", [3], duration_us=20)]
    schedule = chakra_schedule(traces(rank, [node(1, "COMP_NODE", duration_us=5)]), 2, 1)
    assert [s.deps for s in schedule.gpus[0].steps] == [(), ("n1",)]
    assert dict(schedule.skipped_nodes) == {"MEM_LOAD_NODE": 1, "METADATA_NODE": 1}
    assert predict_us(schedule) == pytest.approx(30, abs=0.01)


def test_collectives_meet_by_process_group_and_take_the_ring_time():
    """4 ranks, one all-reduce of 1 MB in the metadata's group: 2(n-1)/n·M/B + 2(n-1)·α
    = 1.5 MB at 80 Gb/s (150 µs) + 6 µs; then pg 'pair' (ranks 0, 1) adds 2 MB·1/2... = 100 + 2 µs."""
    metadata = GlobalMetadata(version="0.0.4")
    metadata.attr.append(attribute("pg_ranks:all4", [0, 1, 2, 3]))
    fabric = FLAT.model_copy(update={"hosts": 4})

    def rank(r):
        nodes = [node(1, "COMM_COLL_NODE", comm_type=COLLECTIVES["ALL_REDUCE"], comm_size=1_000_000, pg_name="all4")]
        if r < 2:
            nodes.append(node(2, "COMM_COLL_NODE", [1], comm_type=COLLECTIVES["ALL_REDUCE"], comm_size=1_000_000,
                              pg_name="pair"))
        return nodes

    schedule = chakra_schedule(traces(*(rank(r) for r in range(4)), metadata=metadata), 4, 1,
                               process_groups={"pair": [0, 1]})
    steps = schedule.gpus[0].steps
    assert [(s.op, s.group) for s in steps] == [("allreduce", (0, 1, 2, 3)), ("allreduce", (0, 1))]
    assert steps[0].channel != steps[1].channel
    assert predict_us(schedule, fabric) == pytest.approx(156 + 102, abs=0.01)


def test_the_example_trace_loads_with_its_groups():
    scenario = load_scenario(ROOT / "scenarios" / "chakra-sip-ring.yaml")
    schedule = schedule_for(scenario)
    assert dict(schedule.skipped_nodes) == {"METADATA_NODE": 8}
    kinds = [s.kind for s in schedule.gpus[0].steps]
    assert kinds.count("collective") == 5 and kinds.count("send") == 2 and kinds.count("recv") == 2
    # tensor-parallel pairs, pipeline partners four ranks apart, data-parallel replicas two apart
    assert schedule.traffic_matrix_bytes[0][1] > 0 and schedule.traffic_matrix_bytes[0][4] == 8_000_000
    assert schedule.traffic_matrix_bytes[0][2] > 0 and schedule.traffic_matrix_bytes[0][3] == 0


def write(directory: Path, files: list[bytes], prefix: str = "t") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for rank, data in enumerate(files):
        (directory / f"{prefix}.{rank}.et").write_bytes(data)
    return directory


def good_pair() -> list[list[Node]]:
    return [[node(1, "COMP_NODE", duration_us=10),
             node(2, "COMM_SEND_NODE", [1], comm_src=0, comm_dst=1, comm_size=100, comm_tag=1)],
            [node(1, "COMM_RECV_NODE", comm_src=0, comm_dst=1, comm_size=100, comm_tag=1)]]


def files_of(ranks) -> list[bytes]:
    return [encode(GlobalMetadata(version="0.0.4"), nodes) for nodes in ranks]


def test_a_good_directory_loads(tmp_path):
    schedule = load_chakra(write(tmp_path / "ok", files_of(good_pair())), 2, 3)
    assert schedule.iterations == 3 and schedule.gpus[1].steps[0].tag == schedule.gpus[0].steps[1].tag


def _bad(change):
    ranks = good_pair()
    change(ranks)
    return files_of(ranks)


@pytest.mark.parametrize("files, hosts, words", [
    (files_of(good_pair()), 4, ["has 2 ranks but the fabric has 4 GPUs"]),
    ([files_of(good_pair())[0][:-3], files_of(good_pair())[1]], 2, ["t.0.et", "truncated", "after node 1"]),
    (_bad(lambda r: setattr(r[0][0], "type", 42)), 2, ["t.0.et", "node 1", "'type' is 42"]),
    (_bad(lambda r: r[0][1].data_deps.append(9)), 2, ["t.0.et", "node 2", "data_deps names node 9"]),
    (_bad(lambda r: r[0][0].ctrl_deps.append(2)), 2, ["t.0.et", "dependency cycle", "1 → 2 → 1"]),
    (_bad(lambda r: r[1].clear()), 2, ["t.0.et", "node 2", "no matching receive on rank 1", "comm_tag 1"]),
    (_bad(lambda r: r[1][0].attr[2].__setattr__("int64_val", 99)), 2, ["t.0.et", "node 2", "sends 100 bytes"]),
    (_bad(lambda r: r[0][1].attr[1].__setattr__("int64_val", 5)), 2, ["t.0.et", "node 2", "'comm_dst'"]),
    (_bad(lambda r: r[0][1].attr[2].__setattr__("string_val", "big")), 2,
     ["t.0.et", "node 2", "'comm_size' must be an integer"]),
    (_bad(lambda r: r[0].append(node(3, "COMM_COLL_NODE", comm_type=COLLECTIVES["ALL_REDUCE"], comm_size=8,
                                     pg_name="tp")) or r[1].append(node(2, "COMM_COLL_NODE", comm_type=0,
                                                                          comm_size=8, pg_name="tp"))), 2,
     ["t.0.et", "node 3", "'pg_name' is 'tp'", "workload.process_groups"]),
    (_bad(lambda r: r[0].append(node(3, "COMM_COLL_NODE", comm_type=COLLECTIVES["ALL_REDUCE"], comm_size=8))), 2,
     ["node 3", "collective 0", "no counterpart on rank 1"]),
    (_bad(lambda r: r[0].append(node(3, "COMM_COLL_NODE", comm_type=COLLECTIVES["ALL_REDUCE"], comm_size=8))
          or r[1].append(node(2, "COMM_COLL_NODE", comm_type=COLLECTIVES["ALL_GATHER"], comm_size=8))), 2,
     ["t.1.et", "node 2", "allgather of 8 bytes here but allreduce"]),
    (_bad(lambda r: r[0].append(node(3, "COMM_COLL_NODE", comm_type=42, comm_size=8))), 2,
     ["node 3", "'comm_type' 42 (unknown)", "ALL_REDUCE (0)", "BARRIER (9)"]),
])
def test_bad_traces_are_refused_with_one_sentence(tmp_path, files, hosts, words):
    with pytest.raises(InputError) as caught:
        load_chakra(write(tmp_path / "bad", files), hosts, 1)
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message


def test_directories_without_one_whole_trace_are_refused(tmp_path):
    for setup, words in [(lambda d: None, "no Chakra trace files"),
                         (lambda d: write(d, files_of(good_pair()), "other"), "files of 2 traces"),
                         (lambda d: (d / "t.0.et").unlink(), "rank 0 has no file t.0.et")]:
        directory = write(tmp_path / f"d{len(list(tmp_path.iterdir()))}", files_of(good_pair()))
        if "no Chakra" in words:
            for path in directory.iterdir():
                path.unlink()
        setup(directory)
        with pytest.raises(InputError, match=words):
            load_chakra(directory, 2, 1)


def test_the_cli_says_one_sentence_and_exits_2(tmp_path, capsys):
    from testbed.interface.cli import main

    write(tmp_path / "trace", [files_of(good_pair())[0][:-2], files_of(good_pair())[1]])
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\nfabric: {kind: elect-flat, hosts: 2, gpu_bandwidth_gbps: 10}\n"
                        "workload: {kind: chakra, path: trace}\n")
    assert main(["predict", str(scenario)]) == 2
    assert "truncated" in capsys.readouterr().err


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
       st.integers(0, 40))
def test_corrupted_trace_files_load_or_fail_with_one_sentence(which, flips, cut):
    """A valid trace with bytes overwritten and its tail cut: a schedule or an InputError."""
    files = files_of(good_pair()) + [b""]
    data = bytearray(files[which % 2])
    for offset, value in flips:
        data[offset % len(data)] = value
    files[which % 2] = bytes(data[:max(0, len(data) - cut)])
    traced = []
    try:
        for rank in range(2):
            traced.append((f"t.{rank}.et", *decode(files[rank], f"t.{rank}.et")))
        chakra_schedule(traced, 2, 1)
    except InputError as error:
        assert "\n" not in str(error) and str(error).startswith("t.")


# A trace holds the steps, not the scenario's policies: jobs on partitioned optics come back as
# one workload that shares the fabric. The 1,024-GPU GPT-3 case has no schedule (closed form);
# llm-ina's gradients go through the aggregation node, which Chakra has no collective for.
EXPORTABLE = [p for p in sorted((ROOT / "scenarios").glob("*.yaml"))
              if getattr(load_scenario(p).workload, "algorithm", None) not in ("byteps", "ps", "ina")
              and load_scenario(p).job_sharing == "shared" and p.stem not in ("gpt3-175b-article", "llm-ina")]


@pytest.mark.parametrize("path", EXPORTABLE, ids=lambda p: p.stem)
def test_export_then_import_predicts_the_same(tmp_path, path):
    scenario = load_scenario(path)
    schedule = schedule_for(scenario)
    back = load_chakra(write(tmp_path / "x", export_chakra(schedule), scenario.name), scenario.fabric.hosts,
                       scenario.workload.iterations)
    before = simulate_schedule(schedule, scenario.fabric).iteration_time_s
    assert simulate_schedule(back, scenario.fabric).iteration_time_s == pytest.approx(before, rel=0.01)


def test_dag_round_runs_one_compute_at_a_time_beside_transfers():
    """Host side: computes c1 and c2 never overlap and the lower index goes first; the transfer t
    (no dependencies) runs while they do; d waits for both c2 and t."""
    from hosts.dag_round import run_dag_round
    from testbed.model.schedule import ComputeStep, RecvStep

    steps = [ComputeStep("c2", 50e3), ComputeStep("c1", 50e3), RecvStep("t", 1, 1000, "t"),
             ComputeStep("d", 50e3, deps=("c2", "t"))]
    spans: dict[str, tuple[float, float]] = {}
    lock = threading.Lock()

    def run_step(index: int):
        began = time.monotonic()
        time.sleep(0.05 if steps[index].kind == "compute" else 0.08)
        with lock:
            spans[steps[index].id] = (began, time.monotonic())
        return None

    run_dag_round(steps, run_step, {})
    assert spans["c2"][1] <= spans["c1"][0]  # index 0 before index 1, never at once
    assert spans["t"][0] < spans["c2"][1]  # the transfer ran beside the first compute
    assert spans["d"][0] >= max(spans["c2"][1], spans["t"][1])


def test_concurrent_receives_from_one_peer_each_get_their_message():
    """Two threads receive from the same peer over real loopback TCP, in the opposite order of
    the sends: the reader stashes what is the other's."""
    import socket

    import numpy as np

    from hosts.transport import TcpTransport

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    a, b = (TcpTransport(rank, ["127.0.0.1", "127.0.0.2"], port) for rank in (0, 1))
    try:
        first, second = np.full(1000, 1, dtype=np.uint8), np.full(2000, 2, dtype=np.uint8)
        got = {tag: np.zeros(size, dtype=np.uint8) for tag, size in ((1, 1000), (2, 2000))}
        readers = [threading.Thread(target=b.recv_into, args=(0, tag, got[tag])) for tag in (2, 1)]
        for reader in readers:
            reader.start()
        a.send(1, 1, first).wait(5)
        a.send(1, 2, second).wait(5)
        for reader in readers:
            reader.join(10)
        assert not any(r.is_alive() for r in readers)
        assert (got[1] == 1).all() and (got[2] == 2).all()
    finally:
        a.close()
        b.close()


def test_predict_shows_the_schedule_simulation_a_run_and_an_exported_trace_share(tmp_path, capsys):
    """`testbed predict` of a placed model prints the simulation of its schedule (what a run is
    judged against); its export, imported as a Chakra workload, predicts exactly that."""
    import json

    from testbed.interface.cli import main

    assert main(["predict", str(ROOT / "scenarios" / "placed-resnet.yaml"), "--json"]) == 0
    simulated = json.loads(capsys.readouterr().out)["predicted_iteration_time_s"]
    scenario = load_scenario(ROOT / "scenarios" / "placed-resnet.yaml")
    write(tmp_path / "trace", export_chakra(schedule_for(scenario)), "placed-resnet")
    chakra = tmp_path / "chakra.yaml"
    chakra.write_text(f"name: c\nfabric: {json.dumps(scenario.fabric.model_dump(exclude_unset=True))}\n"
                      f"workload: {{kind: chakra, path: trace, iterations: 1}}\n")
    assert main(["predict", str(chakra), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["predicted_iteration_time_s"] == pytest.approx(simulated, rel=1e-9)

"""Chakra traces as other tools write them, read and predicted here: MLCommons' own generator
(mlc-chakra), traces laid out as ASTRA-sim's examples are (one `<prefix>.<rank>.et` per rank,
written with mlc-chakra's schema and writer), ASTRA-sim's process-group conventions, and our export
read back by mlc-chakra's decoder and jsonizer. Expected times are the alpha-beta formulas worked
out by hand here (α = 5 µs, B = 100 Gb/s, M = 1 MiB), never taken from the oracle."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

chakra = pytest.importorskip("chakra.src.third_party.utils.protolib", reason="mlc-chakra (setup.sh installs it)")
from chakra.schema.protobuf import et_def_pb2 as pb  # noqa: E402
from chakra.src.generator import generator  # noqa: E402
from chakra.src.third_party.utils.protolib import decodeMessage, openFileRd  # noqa: E402

from testbed.model.errors import InputError  # noqa: E402
from testbed.oracle.schedule_sim import simulate_schedule  # noqa: E402
from testbed.planning.scenario_file import make_fabric, parse_scenario  # noqa: E402
from testbed.workloads.all_kinds import schedule_for  # noqa: E402
from testbed.workloads.chakra.export import comm_group_file, export_chakra  # noqa: E402
from testbed.workloads.chakra.load import load_chakra  # noqa: E402

from ..conftest import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "examples"))  # the trace writers users run, examples/astra_sim_traces.py
import astra_sim_traces as traces  # noqa: E402, I001

ALPHA_S, RATE_BPS, M = 5e-6, 100e9, 1_048_576


def beta(size_bytes: float) -> float:
    return size_bytes * 8 / RATE_BPS


def flat(n: int):
    return make_fabric(kind="elect-flat", hosts=n, gpu_bandwidth_gbps=100, latency_us=5)


def predicted_s(directory: Path, n: int, **groups) -> float:
    schedule = load_chakra(directory, n, 1, **groups)
    return simulate_schedule(schedule, flat(n)).iteration_time_s


# mlc-chakra's generator: each function writes <NAME>.<rank>.et into the working directory.
GENERATED = {
    "allreduce": (generator.one_comm_coll_node_allreduce, lambda n: 2 * (n - 1) * (ALPHA_S + beta(M / n))),
    "allgather": (generator.one_comm_coll_node_allgather, lambda n: (n - 1) * (ALPHA_S + beta(M / n))),
    "reducescatter": (generator.one_comm_coll_node_reducescatter, lambda n: (n - 1) * (ALPHA_S + beta(M / n))),
    "alltoall": (generator.one_comm_coll_node_alltoall, lambda n: (n - 1) * (ALPHA_S + beta(M / n))),
    "broadcast": (generator.one_comm_coll_node_broadcast, lambda n: math.ceil(math.log2(n)) * (ALPHA_S + beta(M))),
}


@pytest.mark.parametrize("n", [8, 16])
@pytest.mark.parametrize("kind", sorted(GENERATED))
def test_mlc_chakra_generated_collectives_predict_the_closed_form(tmp_path, monkeypatch, kind, n):
    make, hand = GENERATED[kind]
    monkeypatch.chdir(tmp_path)
    make(n, M)
    assert predicted_s(tmp_path, n) == pytest.approx(hand(n), rel=0.03)


def test_mlc_chakra_generated_barrier_and_computes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "barrier").mkdir()
    monkeypatch.chdir(tmp_path / "barrier")
    generator.one_comm_coll_node_barrier(4)  # comm_size 0: a token around the ring
    assert predicted_s(tmp_path / "barrier", 4) == pytest.approx(2 * 3 * ALPHA_S, rel=0.03)
    (tmp_path / "comp").mkdir()
    monkeypatch.chdir(tmp_path / "comp")
    generator.two_comp_nodes_dependent(4, 5)  # 5 µs, then 5 µs more
    assert predicted_s(tmp_path / "comp", 4) == pytest.approx(10e-6, rel=1e-6)


def test_mlc_chakra_send_node_without_a_peer_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    generator.one_comm_send_node(2, 1024)  # the generator's send names no destination
    with pytest.raises(InputError, match="'comm_dst'") as caught:
        load_chakra(tmp_path, 2, 1)
    assert "\n" not in str(caught.value)


# The collective types ASTRA-sim's generator does not write, by the same layout.
WRITTEN = {
    "REDUCE": (pb.REDUCE, lambda n: math.ceil(math.log2(n)) * (ALPHA_S + beta(M))),
    "GATHER": (pb.GATHER, lambda n: ALPHA_S + beta((n - 1) * M / n)),
    "SCATTER": (pb.SCATTER, lambda n: ALPHA_S + beta((n - 1) * M / n)),
    "REDUCE_SCATTER_BLOCK": (pb.REDUCE_SCATTER_BLOCK, lambda n: (n - 1) * (ALPHA_S + beta(M / n))),
}


@pytest.mark.parametrize("n", [8, 16])
@pytest.mark.parametrize("kind", sorted(WRITTEN))
def test_every_other_collective_type_predicts_its_formula(tmp_path, kind, n):
    comm_type, hand = WRITTEN[kind]
    traces.write_ranks(tmp_path, kind.lower(), [[traces.collective(0, comm_type, M)] for _ in range(n)])
    assert predicted_s(tmp_path, n) == pytest.approx(hand(n), rel=0.03)


@pytest.mark.parametrize("n", [8, 16])
def test_send_recv_ring_allreduce_predicts_the_ring_formula(tmp_path, n):
    traces.write_ranks(tmp_path, "custom_allreduce", traces.send_recv_ring(n, M))
    assert predicted_s(tmp_path, n) == pytest.approx(2 * (n - 1) * (ALPHA_S + beta(M / n)), rel=0.03)


def test_pg_name_zero_and_empty_are_every_rank(tmp_path):
    n = 4
    for pg in ("0", ""):
        directory = tmp_path / f"pg{pg or 'empty'}"
        traces.write_ranks(directory, "t", [[traces.collective(0, pb.ALL_REDUCE, M, pg=pg)] for _ in range(n)])
        assert predicted_s(directory, n) == pytest.approx(2 * 3 * (ALPHA_S + beta(M / 4)), rel=0.03)


def two_groups(n: int) -> list[list[pb.Node]]:
    """Ranks 0..3 all-reduce in group "1", ranks 4..7 in group "2", at the same time."""
    return [[traces.collective(0, pb.ALL_REDUCE, M, pg="1" if rank < n // 2 else "2")] for rank in range(n)]


def test_a_comm_group_file_in_astra_sims_format_names_the_groups(tmp_path):
    n = 8
    traces.write_ranks(tmp_path / "trace", "t", two_groups(n))
    groups = tmp_path / "comm_group.json"
    groups.write_text(json.dumps({"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]}))
    hand = 2 * 3 * (ALPHA_S + beta(M / 4))  # each group of 4 on its own links
    assert predicted_s(tmp_path / "trace", n, comm_groups=groups) == pytest.approx(hand, rel=0.03)
    with pytest.raises(InputError, match="comm-group file"):
        load_chakra(tmp_path / "trace", n, 1)  # without the file, group "1" has no ranks: one sentence


def test_the_scenario_field_comm_groups_is_relative_to_the_scenario(tmp_path):
    n = 8
    traces.write_ranks(tmp_path / "trace", "t", two_groups(n))
    (tmp_path / "groups.json").write_text(json.dumps({"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]}))
    (tmp_path / "s.yaml").write_text("name: g\nfabric: {kind: elect-flat, hosts: 8, gpu_bandwidth_gbps: 100, "
                                     "latency_us: 5}\n"
                                     "workload: {kind: chakra, path: trace, comm_groups: groups.json}\n")
    from testbed.planning.scenario_file import load_scenario

    schedule = schedule_for(load_scenario(tmp_path / "s.yaml"))
    assert {s.group for g in schedule.gpus for s in g.steps} == {(0, 1, 2, 3), (4, 5, 6, 7)}
    with pytest.raises(InputError, match="comm_groups.*belongs to kind chakra|kind chakra"):
        parse_scenario({"name": "x", "fabric": {"kind": "elect-flat", "hosts": 2, "gpu_bandwidth_gbps": 1},
                        "workload": {"kind": "collective", "collective": "allreduce", "bytes": 8,
                                     "comm_groups": "g.json"}}, "s.yaml")


def test_a_process_group_init_node_as_pytorch_writes_it(tmp_path):
    """PyTorch's execution trace lists its groups in a METADATA node whose inputs.values is a
    Python-style list holding one JSON string; empty ranks mean every rank."""
    n = 8
    entries = [{"pg_name": "0", "ranks": [], "pg_desc": "default_pg"},
               {"pg_name": "1", "ranks": [0, 1, 2, 3]}, {"pg_name": "2", "ranks": [4, 5, 6, 7]}]
    init = pb.Node(id=0, name="## process_group:init ##", type=pb.METADATA_NODE)
    init.inputs.values = "['" + json.dumps(entries) + "']"
    per_rank = [[init, traces.collective(1, pb.ALL_REDUCE, M, pg="1" if r < 4 else "2")] for r in range(n)]
    traces.write_ranks(tmp_path, "t", per_rank)
    assert predicted_s(tmp_path, n) == pytest.approx(2 * 3 * (ALPHA_S + beta(M / 4)), rel=0.03)


def read_with_mlc_chakra(path: Path) -> tuple[pb.GlobalMetadata, list[pb.Node]]:
    stream = openFileRd(str(path))
    metadata = pb.GlobalMetadata()
    decodeMessage(stream, metadata)
    nodes = []
    while True:
        item = pb.Node()
        if not decodeMessage(stream, item):
            break
        nodes.append(item)
    stream.close()
    return metadata, nodes


def test_our_export_is_read_by_mlc_chakras_decoder_and_jsonizer(tmp_path, monkeypatch):
    n = 8
    traces.write_ranks(tmp_path / "in", "t", two_groups(n))
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]}))
    schedule = load_chakra(tmp_path / "in", n, 1, comm_groups=groups)
    out = tmp_path / "out"
    out.mkdir()
    for rank, data in enumerate(export_chakra(schedule)):
        (out / f"x.{rank}.et").write_bytes(data)
    metadata, nodes = read_with_mlc_chakra(out / "x.5.et")
    init, allreduce = nodes
    assert init.type == pb.METADATA_NODE and "process_group:init" in init.name
    attrs = {a.name: a for a in allreduce.attr}
    assert allreduce.type == pb.COMM_COLL_NODE and attrs["comm_type"].int64_val == pb.ALL_REDUCE
    assert attrs["comm_size"].int64_val == M and attrs["pg_name"].string_val == "2"
    assert json.loads(comm_group_file(schedule)) == {"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]}
    # ASTRA-sim strips inputs.values' first and last two characters before parsing the JSON.
    assert json.loads(init.inputs.values[2:-2]) == [{"pg_name": "1", "ranks": [0, 1, 2, 3]},
                                                    {"pg_name": "2", "ranks": [4, 5, 6, 7]}]
    from chakra.src.jsonizer import jsonizer

    monkeypatch.setattr(sys, "argv", ["jsonizer", "--input_filename", str(out / "x.0.et"),
                                      "--output_filename", str(tmp_path / "x.0.json")])
    jsonizer.main()
    text = (tmp_path / "x.0.json").read_text()
    assert '"COMM_COLL_NODE"' in text and '"pg_name"' in text
    # And the export, read back by this testbed, predicts what the original did.
    back = load_chakra(out, n, 1)
    assert simulate_schedule(back, flat(n)).iteration_time_s == pytest.approx(
        simulate_schedule(schedule, flat(n)).iteration_time_s, rel=1e-6)


def test_astra_sims_custom_collective_layout_predicts_by_hand(tmp_path):
    """Hand: 14·(α + 131,072·8/B) + 7·7 µs = 265.8 µs (the reductions' COMP nodes are on the
    critical path: 14·(α + M/(nB)) = 216.8 µs leaves them out)."""
    traces.write_ranks(tmp_path, "custom_allreduce", traces.send_recv_ring(8, M, traces.REDUCTION_US))
    hand = 14 * (ALPHA_S + beta(131_072)) + 7 * 7e-6
    assert hand == pytest.approx(265.8e-6, abs=0.1e-6)
    assert predicted_s(tmp_path, 8) == pytest.approx(hand, rel=0.03)


def test_check_says_which_nodes_it_skips_and_that_durationless_computes_take_zero(tmp_path, capsys):
    from testbed.interface.cli import main

    per_rank = []
    for _ in range(2):
        bare = pb.Node(id=0, name="profiled op without a duration", type=pb.COMP_NODE)
        bare.attr.append(pb.AttributeProto(name="num_ops", uint64_val=10**9))
        per_rank.append([bare, pb.Node(id=1, name="meta", type=pb.METADATA_NODE),
                         traces.collective(2, pb.ALL_REDUCE, M, pg="0")])
    traces.write_ranks(tmp_path / "trace", "t", per_rank)
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\nfabric: {kind: elect-flat, hosts: 2, gpu_bandwidth_gbps: 100, latency_us: 5}\n"
                        "workload: {kind: chakra, path: trace}\n")
    assert main(["check", str(scenario)]) == 0
    out = capsys.readouterr().out.replace("\n", " ")
    assert "2 COMP_NODE without duration (taken as 0 µs)" in out and "2 METADATA_NODE" in out  # both ranks
    assert predicted_s(tmp_path / "trace", 2) == pytest.approx(2 * (ALPHA_S + beta(M / 2)), rel=0.03)

"""Write Chakra traces the way the ecosystem does, one directory per kind, one `<prefix>.<rank>.et`
per rank (ASTRA-sim's layout), with MLCommons' own package (mlc-chakra): its generator for the
collectives it makes (all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, barrier),
its schema and writer for the rest (reduce, gather, scatter, reduce-scatter-block, a send/recv
ring all-reduce, and the node layout of ASTRA-sim's custom-collective example). Each kind comes
with its alpha-beta time worked out by hand, to hold predictions and runs against.

    .venv/bin/python examples/astra_sim_traces.py /tmp/traces --ranks 8 --bytes 1048576
    testbed predict <a scenario with workload: {kind: chakra, path: /tmp/traces/allreduce}>
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path

from chakra.schema.protobuf import et_def_pb2 as pb
from chakra.src.generator import generator
from chakra.src.third_party.utils.protolib import encodeMessage

# A kind's hand time: (ranks, bytes, α in s, B in bit/s) -> seconds.
Hand = Callable[[int, int, float, float], float]


def _beta(size: float, rate_bps: float) -> float:
    return size * 8 / rate_bps


def _ring(passes: int) -> Hand:
    return lambda n, m, a, b: passes * (n - 1) * (a + _beta(m / n, b))


def _tree(n: int, m: int, a: float, b: float) -> float:
    return math.ceil(math.log2(n)) * (a + _beta(m, b))


def _direct(n: int, m: int, a: float, b: float) -> float:
    return a + _beta((n - 1) * m / n, b)


REDUCTION_US = 7  # ASTRA-sim's custom ring all-reduce example reduces each received chunk in 7 µs

GENERATED: dict[str, tuple[Callable[[int, int], None], Hand]] = {
    "allreduce": (generator.one_comm_coll_node_allreduce, _ring(2)),
    "allgather": (generator.one_comm_coll_node_allgather, _ring(1)),
    "reducescatter": (generator.one_comm_coll_node_reducescatter, _ring(1)),
    "alltoall": (generator.one_comm_coll_node_alltoall, _ring(1)),
    "broadcast": (generator.one_comm_coll_node_broadcast, _tree),
    "barrier": (lambda n, m: generator.one_comm_coll_node_barrier(n), lambda n, m, a, b: 2 * (n - 1) * a),
}
WRITTEN_COLLECTIVES: dict[str, tuple[int, Hand]] = {
    "reduce": (pb.REDUCE, _tree),
    "gather": (pb.GATHER, _direct),
    "scatter": (pb.SCATTER, _direct),
    "reduce_scatter_block": (pb.REDUCE_SCATTER_BLOCK, _ring(1)),
}


def write_ranks(directory: Path, prefix: str, per_rank: list[list[pb.Node]],
                metadata: pb.GlobalMetadata | None = None) -> Path:
    """One file per rank with mlc-chakra's writer: GlobalMetadata, then the rank's nodes."""
    directory.mkdir(parents=True, exist_ok=True)
    for rank, nodes in enumerate(per_rank):
        with open(directory / f"{prefix}.{rank}.et", "wb") as out:
            encodeMessage(out, metadata or pb.GlobalMetadata(version="0.0.4"))
            for item in nodes:
                encodeMessage(out, item)
    return directory


def collective(ident: int, comm_type: int, size: int, pg: str | None = None) -> pb.Node:
    made = pb.Node(id=ident, name=f"coll{ident}", type=pb.COMM_COLL_NODE)
    made.attr.append(pb.AttributeProto(name="is_cpu_op", bool_val=False))
    made.attr.append(pb.AttributeProto(name="comm_type", int64_val=comm_type))
    made.attr.append(pb.AttributeProto(name="comm_size", int64_val=size))
    made.attr.append(pb.AttributeProto(name="involved_dim", bool_list=pb.BoolList(values=[True])))
    if pg is not None:
        made.attr.append(pb.AttributeProto(name="pg_name", string_val=pg))
    return made


def point_to_point(ident: int, sending: bool, peer: int, size: int, deps: tuple[int, ...] = ()) -> pb.Node:
    """A COMM_SEND or COMM_RECV node as ASTRA-sim's examples write them (the own rank implied)."""
    kind = pb.COMM_SEND_NODE if sending else pb.COMM_RECV_NODE
    made = pb.Node(id=ident, name=f"{'send' if sending else 'recv'}{ident}", type=kind)
    made.data_deps.extend(deps)
    made.attr.append(pb.AttributeProto(name="comm_type", int64_val=kind))
    made.attr.append(pb.AttributeProto(name="comm_size", int64_val=size))
    made.attr.append(pb.AttributeProto(name="comm_dst" if sending else "comm_src", int32_val=peer))
    made.attr.append(pb.AttributeProto(name="comm_tag", int32_val=0))
    return made


def send_recv_ring(n: int, size: int, reduction_us: int = 0) -> list[list[pb.Node]]:
    """A ring all-reduce in point-to-point messages, as ASTRA-sim's custom-collective traces lay it
    out: on every rank, 2(n-1) times, send a chunk of size/n to the next rank, then (depending on
    that send) receive one from the previous; the next send waits for the receive. Every rank sends
    first. With `reduction_us`, a COMP node reduces each of the first n-1 chunks received."""
    ranks = []
    for rank in range(n):
        nodes: list[pb.Node] = []
        last: int | None = None
        for step in range(2 * (n - 1)):
            ident = len(nodes)
            send = point_to_point(ident, True, (rank + 1) % n, size // n, deps=() if last is None else (last,))
            recv = point_to_point(ident + 1, False, (rank - 1) % n, size // n, deps=(ident,))
            nodes += [send, recv]
            last = recv.id
            if reduction_us and step < n - 1:
                comp = pb.Node(id=len(nodes), name=f"COMP_NODE_step{step}", type=pb.COMP_NODE,
                               duration_micros=reduction_us)
                comp.data_deps.append(last)
                nodes.append(comp)
                last = comp.id
        ranks.append(nodes)
    return ranks


def write_all(out: Path, ranks: int, size: int) -> dict[str, tuple[Path, Hand]]:
    """Every kind's trace directory under `out`, with its hand time."""
    made: dict[str, tuple[Path, Hand]] = {}
    here = Path.cwd()
    for kind, (make, hand) in GENERATED.items():
        directory = out / kind
        directory.mkdir(parents=True, exist_ok=True)
        os.chdir(directory)  # the generator writes into the working directory
        try:
            make(ranks, size)
        finally:
            os.chdir(here)
        made[kind] = (directory, hand)
    for kind, (comm_type, hand) in WRITTEN_COLLECTIVES.items():
        made[kind] = (write_ranks(out / kind, kind, [[collective(0, comm_type, size)] for _ in range(ranks)]), hand)
    made["sendrecv_ring"] = (write_ranks(out / "sendrecv_ring", "custom_allreduce", send_recv_ring(ranks, size)),
                             _ring(2))
    reduction_s = (ranks - 1) * REDUCTION_US * 1e-6
    made["custom_ring"] = (write_ranks(out / "custom_ring", "custom_allreduce",
                                       send_recv_ring(ranks, size, REDUCTION_US)),
                           lambda n, m, a, b: _ring(2)(n, m, a, b) + reduction_s)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="directory to fill, one sub-directory per kind")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--bytes", type=int, default=1_048_576, help="each collective's size (ASTRA-sim's: 1 MiB)")
    args = parser.parse_args()
    for kind, (directory, hand) in write_all(args.out.resolve(), args.ranks, args.bytes).items():
        print(f"{kind:22s} {directory}  hand time at α 5 µs, B 100 Gb/s: "
              f"{hand(args.ranks, args.bytes, 5e-6, 100e9) * 1e6:.1f} µs")


if __name__ == "__main__":
    main()

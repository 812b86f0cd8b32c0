"""Write the example Chakra trace in scenarios/traces/chakra-3d/: 8 ranks training with 2-way tensor
parallelism, 2 pipeline stages and 2-way data parallelism (rank = 4·stage + 2·replica + tp), two
micro-batches per iteration in a GPipe order. Each micro-batch's forward and backward compute
ends in a tensor-parallel all-reduce; stages pass activations forward and gradients back by
send/recv; the iteration ends with each stage's data-parallel all-reduce of its gradients.

    .venv/bin/python examples/chakra_trace.py    # rewrites the directory (deterministic)
    testbed predict scenarios/chakra-sip-ring.yaml
"""

from __future__ import annotations

from pathlib import Path

from testbed.workloads.chakra.proto import COLLECTIVES, NODE_TYPES, GlobalMetadata, Node, attribute, encode

OUT = Path(__file__).resolve().parent.parent / "scenarios" / "traces" / "chakra-3d"
MICRO_BATCHES = 2
FORWARD_US, BACKWARD_US = 400, 800
TP_BYTES = 2_000_000  # a micro-batch's activations, all-reduced inside a tensor-parallel pair
PP_BYTES = 4_000_000  # activations forward / gradients back between the stages
DP_BYTES = 16_000_000  # a stage's gradients, all-reduced between the replicas


def rank_of(stage: int, replica: int, tp: int) -> int:
    return 4 * stage + 2 * replica + tp


def groups() -> dict[str, list[int]]:
    named = {}
    for stage in range(2):
        for replica in range(2):
            named[f"tp_s{stage}r{replica}"] = [rank_of(stage, replica, tp) for tp in range(2)]
        for tp in range(2):
            named[f"dp_s{stage}t{tp}"] = [rank_of(stage, replica, tp) for replica in range(2)]
    return named


class Trace:
    def __init__(self) -> None:
        self.nodes: list = []

    def add(self, kind: str, name: str, deps: list[int], **attrs: int | str) -> int:
        node = Node(id=len(self.nodes), name=name, type=NODE_TYPES[kind])
        node.data_deps.extend(deps)
        node.attr.append(attribute("is_cpu_op", False))
        for key, value in attrs.items():
            node.attr.append(attribute(key, value))
        self.nodes.append(node)
        return node.id

    def compute(self, name: str, deps: list[int], duration_us: int) -> int:
        ident = self.add("COMP_NODE", name, deps)
        self.nodes[ident].duration_micros = duration_us
        return ident

    def all_reduce(self, name: str, deps: list[int], size: int, pg: str) -> int:
        return self.add("COMM_COLL_NODE", name, deps, comm_type=COLLECTIVES["ALL_REDUCE"], comm_size=size,
                        pg_name=pg)


def rank_trace(stage: int, replica: int, tp: int) -> Trace:
    me = rank_of(stage, replica, tp)
    other = rank_of(1 - stage, replica, tp)
    tp_group, dp_group = f"tp_s{stage}r{replica}", f"dp_s{stage}t{tp}"
    trace = Trace()
    start = trace.add("METADATA_NODE", "process_group:init", [])
    forward_done = []
    last = start
    for mb in range(MICRO_BATCHES):
        deps = [last]
        if stage == 1:
            deps.append(trace.add("COMM_RECV_NODE", f"recv activations mb{mb}", [start], comm_src=other,
                                  comm_dst=me, comm_size=PP_BYTES, comm_tag=mb))
        compute = trace.compute(f"forward mb{mb}", deps, FORWARD_US)
        reduced = trace.all_reduce(f"tp all-reduce forward mb{mb}", [compute], TP_BYTES, tp_group)
        if stage == 0:
            trace.add("COMM_SEND_NODE", f"send activations mb{mb}", [reduced], comm_src=me, comm_dst=other,
                      comm_size=PP_BYTES, comm_tag=mb)
        forward_done.append(reduced)
        last = compute
    for mb in range(MICRO_BATCHES):
        deps = [last, forward_done[mb]]
        if stage == 0:
            deps.append(trace.add("COMM_RECV_NODE", f"recv gradients mb{mb}", [start], comm_src=other,
                                  comm_dst=me, comm_size=PP_BYTES, comm_tag=100 + mb))
        compute = trace.compute(f"backward mb{mb}", deps, BACKWARD_US)
        reduced = trace.all_reduce(f"tp all-reduce backward mb{mb}", [compute], TP_BYTES, tp_group)
        if stage == 1:
            trace.add("COMM_SEND_NODE", f"send gradients mb{mb}", [reduced], comm_src=me, comm_dst=other,
                      comm_size=PP_BYTES, comm_tag=100 + mb)
        last = reduced
    trace.all_reduce("dp all-reduce gradients", [last], DP_BYTES, dp_group)
    return trace


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.et"):
        old.unlink()
    for stage in range(2):
        for replica in range(2):
            for tp in range(2):
                metadata = GlobalMetadata(version="0.0.4")
                for name, ranks in groups().items():
                    metadata.attr.append(attribute(f"pg_ranks:{name}", ranks))
                path = OUT / f"tp2-pp2-dp2.{rank_of(stage, replica, tp)}.et"
                path.write_bytes(encode(metadata, rank_trace(stage, replica, tp).nodes))
    print(f"wrote 8 ranks to {OUT}")


if __name__ == "__main__":
    main()

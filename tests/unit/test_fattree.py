"""Elect-Fattree, a leaf-spine added as one registered kind: its topology, its ECMP rules and its
oracle, with expected values computed by hand."""

from __future__ import annotations

import pytest

from testbed.fabrics.leaf_spine import PRIORITY_ECMP, ecmp_spine
from testbed.fabrics.programming import switch_rules
from testbed.fabrics.topology import build_topology
from testbed.model.errors import InputError
from testbed.model.fabric_section import FabricSection
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import predict_scenario
from testbed.planning.scenario_file import load_scenario, make_fabric

from ..conftest import ROOT

B_EMULATED = 40e6


def fabric(oversubscription: float = 4.0, hosts: int = 16) -> FabricSection:
    return make_fabric(kind="elect-fattree", hosts=hosts, gpu_bandwidth_gbps=100, leaf_hosts=4, spines=2,
                  oversubscription=oversubscription)


def test_leaves_of_four_gpus_wired_to_both_spines_at_the_oversubscribed_rate():
    topology = build_topology(fabric(4.0), "ab12", B_EMULATED, "user")
    roles = [sw.role for sw in topology.switches]
    assert roles.count("spine") == 2 and roles.count("leaf") == 4
    uplinks = [link for link in topology.links if link.peer_switch is not None]
    # 4 leaves × 2 spines; each link B·4/4/2 = B/2 of the emulated rate.
    assert len(uplinks) == 8 and {link.payload_rate_bps for link in uplinks} == {B_EMULATED / 2}
    assert [h.switch for h in topology.hosts[:5]] == [topology.hosts[0].switch] * 4 + \
        [topology.hosts[4].switch] and topology.hosts[4].switch != topology.hosts[0].switch


def test_each_pair_across_leaves_leaves_by_the_uplink_to_its_hashed_spine():
    topology = build_topology(fabric(1.0), "ab12", B_EMULATED, "user")
    rules = switch_rules(topology)
    spines = [sw.name for sw in topology.switches if sw.role == "spine"]
    leaf = next(sw for sw in topology.switches if sw.role == "leaf")
    uplink_port = {link.peer_switch: link.port for link in topology.links
                   if link.switch == leaf.name and link.peer_switch is not None}
    ecmp = [r for r in rules[int(leaf.dpid)] if r.priority == PRIORITY_ECMP]
    assert len(ecmp) == 4 * 12  # every local GPU to every GPU of the other three leaves
    macs = {h.mac: h.rank for h in topology.hosts}
    for rule in ecmp:
        src, dst = macs[rule.match_dict()["eth_src"]], macs[rule.match_dict()["eth_dst"]]
        assert rule.out_port == uplink_port[spines[ecmp_spine(src, dst, 2)]]
    # The hash uses both spines.
    assert {ecmp_spine(s, d, 2) for s in range(4) for d in range(4, 16)} == {0, 1}


@pytest.mark.parametrize("oversubscription,expected_ms", [(1.0, 15.15), (4.0, 30.15)])
def test_ring_allreduce_pays_for_oversubscribed_uplinks(oversubscription, expected_ms):
    # 100 MB over 16 GPUs: 30 steps of M/16 = 50 Mbit. Non-blocking: at B = 100 Gb/s, 0.5 ms + α
    # (5 µs). Oversubscription 4: the one flow leaving each leaf per step gets its leaf's uplink
    # to one spine, 100·4/4/2 = 50 Gb/s: 1 ms + α.
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "fattree-allreduce.yaml"),
                               {"fabric.oversubscription": oversubscription})
    assert predict_scenario(scenario).iteration_time_s == pytest.approx(expected_ms * 1e-3, rel=1e-9)


def test_a_leaf_size_that_does_not_divide_the_hosts_is_refused():
    with pytest.raises(InputError, match=r"leaf_hosts \(4\) must divide hosts \(10\)"):
        fabric(hosts=10)
    with pytest.raises(InputError, match="field 'spines' applies only to kind elect-fattree"):
        make_fabric(kind="elect-flat", hosts=4, gpu_bandwidth_gbps=100, spines=2)

"""Pure optical planning: link states rendered as rules and routes, validation, reconfiguration diffs,
and northbound request parsing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller import reconfig
from controller.northbound import BadRequest, parse_links
from testbed.fabrics.programming import render, validate
from testbed.fabrics.rendering import PlanError, hold
from testbed.fabrics.topology import build_topology
from testbed.model.schedule import cut_pairs
from testbed.oracle.fabrics import forwarding_load_factor
from testbed.planning.scenario_file import make_fabric


def ocs(n=4, q=2):
    fabric = make_fabric(kind="sip-ocs", hosts=n, gpu_bandwidth_gbps=100, ocs_switches=q)
    return build_topology(fabric, "ab12", 40e6, "user")


def ring(n=6, w=4):
    fabric = make_fabric(kind="sip-ring", hosts=n, gpu_bandwidth_gbps=100, wavelengths=w)
    return build_topology(fabric, "ab12", 40e6, "user")


def test_circuits_are_port_to_port_rules_and_hosts_relay_the_rest():
    topo = ocs(4, 1)
    state = {(0, i, (i + 1) % 4): 1 for i in range(4)}
    rendering = render(topo, state)
    rules = rendering.rules[topo.switches[0].dpid]
    assert {(r.match_dict()["in_port"], r.out_port) for r in rules} == {(1, 2), (2, 3), (3, 4), (4, 1)}
    routes = rendering.host_lines[0]
    assert "via 10.0.0.2 dev h1-eth0" in routes["route 1"]  # direct
    assert "10.0.0.3/32 via 10.0.0.2" in routes["route 2"]  # relayed by GPU 1
    assert rendering.unreachable == ()


def test_parallel_circuits_shape_one_port_to_their_summed_rate():
    topo = ocs(2, 2)
    rendering = render(topo, {(0, 0, 1): 1, (1, 0, 1): 1, (0, 1, 0): 1})
    rate = topo.ocs.circuit_rate_bps
    assert "dev h1-eth0" in rendering.host_lines[0]["route 1"]
    assert f"rate {int(round(2 * rate * 1514 / 1448))}bit" in rendering.host_lines[0]["rate 0"]


def test_unreachable_pairs_are_reported_and_routed_nowhere():
    rendering = render(ocs(3, 1), {(0, 0, 1): 1})
    assert (0, 2) in rendering.unreachable and (1, 0) in rendering.unreachable
    assert "unreachable 10.0.0.3/32" in rendering.host_lines[0]["route 2"]


def test_a_plan_is_checked_for_cutting_pairs_that_exchange_data_either_way():
    # Ring of 4, lightpaths 0->1 and 1->2 only: 1 reaches 0 by no path, 2 reaches 1 by none.
    rendering = render(ring(4, 4), {(0, 1): 1, (1, 2): 1})
    assert cut_pairs(rendering.unreachable, [(0, 1)]) == [(1, 0)]  # data 0->1 needs 1->0 for the ACKs
    assert cut_pairs(rendering.unreachable, [(2, 1)]) == [(2, 1)]
    assert cut_pairs(render(ring(4, 4), {(0, 1): 1, (1, 0): 1}).unreachable, [(0, 1)]) == []
    # On an OCS, a relay is a path: 0->1->2 and back 2->1->0 through circuits.
    relayed = render(ocs(3, 2), {(0, 0, 1): 1, (0, 1, 2): 1, (1, 2, 1): 1, (1, 1, 0): 1})
    assert cut_pairs(relayed.unreachable, [(0, 2)]) == []


@pytest.mark.parametrize("state, words", [
    ({(0, 0, 1): 1, (0, 0, 2): 1}, "transmits on more than one circuit"),
    ({(0, 0, 2): 1, (0, 1, 2): 1}, "receives on more than one circuit"),
    ({(5, 0, 1): 1}, "names OCS 5"),
    ({(0, 1, 1): 1}, "two different GPUs"),
])
def test_circuits_that_no_ocs_can_make_are_refused(state, words):
    with pytest.raises(PlanError, match=words):
        validate(ocs(4, 2), state)


def test_lightpaths_beyond_reach_or_wavelengths_are_refused():
    topo = ring(6, 2)
    with pytest.raises(PlanError, match="more than its 2 wavelengths"):
        validate(topo, {(0, 1): 2, (0, 2): 1})
    with pytest.raises(PlanError, match="ring segment"):
        validate(topo, {(0, 2): 1, (1, 2): 1, (1, 3): 1})
    topo = topo.model_copy(update={"ring": topo.ring.model_copy(update={"reach": 1})})
    with pytest.raises(PlanError, match="beyond the reach"):
        validate(topo, {(0, 3): 1})


def test_lightpath_classes_follow_wavelength_counts():
    topo = ring(4, 4)
    rendering = render(topo, {(0, 1): 3, (1, 0): 1})
    wave = topo.ring.wavelength_rate_bps
    assert f"rate {int(3 * wave * 1514 / 1448)}bit" in rendering.host_lines[0]["class 1"]
    (rules,) = rendering.rules.values()
    assert {(r.match_dict()["in_port"], r.out_port) for r in rules} == {(1, 2), (2, 1)}


def test_reconfiguration_keeps_the_smaller_amount_dark_and_diffs_only_changes():
    old = {(0, 1): 3, (1, 2): 1}
    new = {(0, 1): 1, (0, 2): 2}
    change = reconfig.request(old, new, now_s=5.0, dark_s=0.01, ident=7, source="api")
    assert change.dark == {(0, 1): 1}
    assert change.changed() == [(0, 1), (0, 2), (1, 2)]
    assert reconfig.request(new, dict(new), 5.0, 0.01, 8, "api") is None
    topo = ring(4, 4)
    ops = reconfig.operations(render(topo, old), render(topo, change.dark))
    removed = [r for rules in ops.delete.values() for r in rules]
    assert [r.out_port for r in removed] == [3]  # the 1→2 lightpath goes dark
    event = change.event(reconfig.Darkness(5.001, 5.012, 0.011), dilation=100.0)
    assert event["measured_dark_s"] == pytest.approx(0.011)
    assert event["real_measured_dark_s"] == pytest.approx(1.1e-4)
    assert event["real_configured_dark_s"] == pytest.approx(1e-4)


def test_each_host_is_dark_from_its_own_darkening_to_its_own_restore():
    # Host 0 darkened at 1.0002 and restored at 1.0103: dark 10.1 ms. Host 1 had nothing to darken
    # (a new lightpath retunes from the agreed instant 1.0000) and restored at 1.0101: 10.1 ms.
    # Host 2 only darkened (at 1.0004; a removed lightpath), so it is back at the restore instant
    # 1.0100: 9.6 ms. The longest, 10.1 ms, is the reconfiguration's measured dark time.
    measured = reconfig.darkness(1.0, 1.01, {0: 1.0002, 2: 1.0004}, {0: 1.0103, 1: 1.0101})
    assert measured.dark_start_s == pytest.approx(1.0)
    assert measured.restored_s == pytest.approx(1.0103)
    assert measured.measured_s == pytest.approx(0.0101)
    assert reconfig.darkness(2.0, 2.025, {}, {}).measured_s == pytest.approx(0.025)  # no host acts


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 5), st.integers(0, 5)), max_size=12))
def test_any_valid_circuit_state_renders_one_rule_per_circuit(circuits):
    topo = ocs(6, 3)
    state = {c: 1 for c in circuits}
    try:
        validate(topo, state)
    except PlanError:
        return
    rendering = render(topo, state)
    assert sum(len(r) for r in rendering.rules.values()) == len(state)
    for src, lines in rendering.host_lines.items():
        assert len([k for k in lines if k.startswith("route")]) == 5


def test_northbound_bodies_are_checked_before_anything_changes():
    assert parse_links("circuits", {"circuits": [[0, 1, 2]]}) == {(0, 1, 2): 1}
    assert parse_links("lightpaths", {"lightpaths": [[0, 1, 3]]}) == {(0, 1): 3}
    for body in ({"circuits": [[0, 1]]}, {"circuits": [[0, 1, "2"]]}, {"circuits": [[0, 1, 2], [0, 1, 2]]},
                 {"lightpaths": []}, [], {"circuits": 3}):
        with pytest.raises(BadRequest):
            parse_links("circuits", body)


def test_forwarding_load_counts_relays_and_switch_crossings():
    ring8 = {(i, (i + 1) % 8): 1.0 for i in range(8)}
    assert forwarding_load_factor(make_fabric(kind="elect-flat", hosts=8, gpu_bandwidth_gbps=1), ring8) == 1.0
    ocs = make_fabric(kind="sip-ocs", hosts=8, gpu_bandwidth_gbps=1, ocs_switches=4)
    ocs_factor = forwarding_load_factor(ocs, ring8)
    assert ocs_factor == pytest.approx((1 + 0.5 * 7) / 1.5)
    cluster = make_fabric(kind="elect-cluster", hosts=8, gpu_bandwidth_gbps=1, gpus_per_server=4)
    # Two ring flows leave their server: three switches and two links between switches each.
    assert forwarding_load_factor(cluster, ring8) == pytest.approx((6 + 2 * (3 + 2)) / 8)


def test_rules_for_links_not_there_yet_go_in_while_dark_and_changes_wait_for_the_restore():
    topo = ring(4, 4)
    dark = render(topo, {(0, 1): 1, (1, 0): 1})
    new = render(topo, {(0, 1): 1, (1, 0): 1, (0, 2): 1})
    early, rest = reconfig.split_new_rules(dark, reconfig.operations(dark, new))
    assert [(r.match, r.out_port) for rules in early.values() for r in rules if r.out_port == 3]
    assert not any(rest.add.values())
    ocs_topo = ocs(4, 1)
    before = render(ocs_topo, {(0, 0, 1): 1})
    after = render(ocs_topo, {(0, 0, 2): 1})
    early, rest = reconfig.split_new_rules(before, reconfig.operations(before, after))
    moved = [r for rules in rest.add.values() for r in rules]
    assert moved and all(r.match == (("in_port", 1),) for r in moved)  # same port, new peer: at the restore


def _applied(rules: dict, ops: reconfig.Operations) -> dict:
    """Switch rules after `ops`, deletions first, as the controller sends them."""
    out = {d: set(r) for d, r in rules.items()}
    for dpid, gone in ops.delete.items():
        out[dpid] -= set(gone)
    for dpid, added in ops.add.items():
        keys = {(r.table, r.priority, r.match) for r in added}
        out[dpid] = {r for r in out.get(dpid, set()) if (r.table, r.priority, r.match) not in keys} | set(added)
    return out


def test_new_links_go_in_ahead_and_a_new_peer_for_a_port_follows_the_darkening():
    topo = ring(4, 4)
    old = render(topo, {(0, 1): 1, (1, 0): 1})
    new = render(topo, {(0, 1): 1, (1, 0): 1, (0, 2): 1})
    batches = reconfig.steps(old, render(topo, {(0, 1): 1, (1, 0): 1}), new)
    assert [r.out_port for rules in batches.ahead.add.values() for r in rules] == [3]  # the new lightpath
    assert not any(batches.dark.add.values()) and not any(batches.restore.add.values())
    ocs_topo = ocs(4, 1)
    old, new = render(ocs_topo, {(0, 0, 1): 1}), render(ocs_topo, {(0, 0, 2): 1})
    batches = reconfig.steps(old, render(ocs_topo, {}), new)
    assert not any(batches.ahead.add.values())  # port 1 had a circuit: not before it goes dark
    assert [r.out_port for rules in batches.dark.add.values() for r in rules] == [3]


def test_pairs_the_dark_cuts_wait_on_the_port_of_their_new_link_and_are_released_before_its_route():
    # GPU 0's circuit on OCS 1 moves from GPU 3 to GPU 2: 0->2 is relayed by 3 before (0->3 on
    # OCS 1, 3->2 on OCS 0) and direct after, and nothing joins 0 to 2 while OCS 1 retunes.
    topo = ocs(4, 2)
    before = {(0, 3, 2): 1, (1, 0, 3): 1, (0, 2, 0): 1}
    after = {(0, 3, 2): 1, (1, 0, 2): 1, (0, 2, 0): 1}
    change = reconfig.request(before, after, 0.0, 0.01, 1, "test")
    old, dark, new = render(topo, change.old), render(topo, change.dark), render(topo, change.new)
    assert (0, 2) in dark.unreachable and new.next_hops[0][2] == (2, 1)
    held = hold(topo, dark, new)
    # Held on h1-eth1 (the new circuit's port) behind a neighbour no one answers ...
    assert held.dark.host_lines[0]["route 2"] == "ip route replace 10.0.0.3/32 via 198.18.0.2 dev h1-eth1 onlink"
    # ... which the restore resolves to GPU 2's MAC on OCS 1 before routing onto the circuit.
    mac = topo.hosts[2].interfaces[1].mac
    restore = reconfig.steps(old, held, new).restore.host_lines[0]
    assert restore[0] == f"ip neigh replace 198.18.0.2 lladdr {mac} dev h1-eth1 nud permanent"
    assert "ip route replace 10.0.0.3/32 via 10.0.0.3 dev h1-eth1 onlink" in restore
    assert restore[-1] == "ip neigh del 198.18.0.2 dev h1-eth1"
    # 0->3 loses its only circuit and gains no path: cut before and after, so it stays unreachable.
    assert "unreachable 10.0.0.4/32" in held.dark.host_lines[0]["route 3"] and (0, 3) in new.unreachable


@settings(max_examples=150, deadline=None)
@given(st.sets(st.tuples(st.integers(0, 1), st.integers(0, 4), st.integers(0, 4)), max_size=8),
       st.sets(st.tuples(st.integers(0, 1), st.integers(0, 4), st.integers(0, 4)), max_size=8))
def test_reconfiguration_steps_end_at_the_new_rules_and_never_touch_old_ones_ahead(old_set, new_set):
    topo = ocs(5, 2)

    def valid(circuits):
        tx, rx, kept = set(), set(), {}
        for q, s, d in sorted(circuits):
            if s != d and (q, s) not in tx and (q, d) not in rx:
                tx.add((q, s))
                rx.add((q, d))
                kept[(q, s, d)] = 1
        return kept

    old_state, new_state = valid(old_set), valid(new_set)
    change = reconfig.request(old_state, new_state, 0.0, 0.01, 1, "test")
    if change is None:
        return
    old, dark, new = render(topo, change.old), render(topo, change.dark), render(topo, change.new)
    batches = reconfig.steps(old, hold(topo, dark, new), new)
    old_keys = {d: {(r.table, r.priority, r.match) for r in rules} for d, rules in old.rules.items()}
    for dpid, added in batches.ahead.add.items():
        assert not {(r.table, r.priority, r.match) for r in added} & old_keys[dpid]
    rules = _applied(_applied({d: set(r) for d, r in old.rules.items()}, batches.ahead), batches.dark)
    assert all(set(dark.rules[d]) <= rules[d] for d in dark.rules)  # what stays lit carries on while dark
    assert _applied(_applied(rules, batches.restore), batches.after) == {d: set(r) for d, r in new.rules.items()}
    # The restore is the hosts' alone, so they can time it without waiting on a switch.
    assert not any(batches.restore.add.values()) and not any(batches.restore.delete.values())


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.tuples(st.integers(0, 5), st.integers(0, 5)), st.integers(0, 2), max_size=10),
       st.dictionaries(st.tuples(st.integers(0, 5), st.integers(0, 5)), st.integers(0, 2), max_size=10))
def test_ring_restores_need_no_switch_and_end_at_the_new_rules(old_state, new_state):
    topo = ring(6, 4)
    old_state = {k: c for k, c in old_state.items() if k[0] != k[1]}
    new_state = {k: c for k, c in new_state.items() if k[0] != k[1]}
    change = reconfig.request(old_state, new_state, 0.0, 0.01, 1, "test")
    if change is None:
        return
    old, dark, new = render(topo, change.old), render(topo, change.dark), render(topo, change.new)
    batches = reconfig.steps(old, dark, new)
    rules = _applied(_applied({d: set(r) for d, r in old.rules.items()}, batches.ahead), batches.dark)
    assert _applied(_applied(rules, batches.restore), batches.after) == {d: set(r) for d, r in new.rules.items()}
    assert not any(batches.restore.add.values()) and not any(batches.restore.delete.values())
    # A lightpath gone for good keeps its rule until after the restore: what its source queued
    # before moving off drains over it.
    gone = {d: {r for r in old.rules[d] if r not in new.rules.get(d, frozenset())} for d in old.rules}
    assert {d: set(r) for d, r in batches.after.delete.items()} == {d: r for d, r in gone.items() if r}
    assert not any(batches.dark.delete.values())


def test_multi_shot_circuits_keep_every_recurring_pair_reachable():
    from testbed.fabrics.programming import plan_for

    topo = ocs(4, 3)
    fabric = make_fabric(kind="sip-ocs", hosts=4, gpu_bandwidth_gbps=100, ocs_switches=3, multi_shot=True)
    recurring = ((0, 1), (1, 0), (2, 3), (3, 2), (0, 2), (2, 0), (1, 3), (3, 1))
    mp_phase = {(0, 1): 5e6, (1, 0): 5e6, (2, 3): 5e6, (3, 2): 5e6}  # the last period saw no DP traffic
    rendering = render(topo, plan_for(topo, fabric, mp_phase, recurring))
    assert not set(recurring) & set(rendering.unreachable)


def test_a_ring_re_plan_retunes_only_when_it_gains_more_than_the_dark_time():
    from testbed.fabrics.programming import plan_for

    # 6 GPUs, 4 wavelengths of 25 Gb/s, 1 MB to each clockwise neighbour. The fresh plan gives each
    # 3 wavelengths (one stays with the counter-clockwise neighbour): 8 Mbit / 75 Gb/s = 106.7 µs.
    # In force, GPU 0 sends to 1 on 2 (160 µs): 53.3 µs to gain, worth a 25 µs retune, not a 100 µs one.
    topo = ring(6, 4)
    fabric = make_fabric(kind="sip-ring", hosts=6, gpu_bandwidth_gbps=100, wavelengths=4, wavelength_gbps=25,
                         neighbors=2)
    ring_pairs = tuple((i, (i + 1) % 6) for i in range(6))
    traffic = {pair: 1e6 for pair in ring_pairs}
    fresh = plan_for(topo, fabric, traffic, ring_pairs)
    assert {pair: fresh[pair] for pair in ring_pairs} == {pair: 3 for pair in ring_pairs}
    held = {**fresh, (0, 1): 2, (0, 5): 2}
    assert plan_for(topo, fabric, traffic, ring_pairs, held, dark_s=100e-6) == held
    assert plan_for(topo, fabric, traffic, ring_pairs, held, dark_s=25e-6) == fresh

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.fabrics.ps.behaviour import byteps_bytes_per_machine
from testbed.fabrics.sip_ocs.circuits import plan_circuits, replan_circuits
from testbed.fabrics.sip_ring.wavelengths import plan_wavelengths, segments
from testbed.network.collectives import ring_allreduce_time_s
from testbed.network.flows import Flow, completion_times, max_min_rates
from testbed.oracle.fabrics import dp_allreduce_s, mp_flow_model
from testbed.oracle.iteration import dp_ring_bytes, predict_plan
from testbed.placer.plan import make_plan
from testbed.placer.profiles import device
from testbed.placer.settings import PlanSettings
from testbed.placer.zoo import MODELS
from testbed.planning.scenario_file import make_fabric


def test_max_min_fairness():
    caps = {"a": 10.0, "b": 2.0}
    # Flow 1 crosses a and b, flows 2 and 3 only a: b caps flow 1 at 2, the rest of a is shared.
    assert max_min_rates([Flow(0, 1, ("a", "b")), Flow(0, 1, ("a",)), Flow(0, 1, ("a",))], caps) == \
        pytest.approx([2.0, 4.0, 4.0])
    assert completion_times([Flow(0, 1, ("b",)), Flow(2, 0.5, ("b",))], caps) == pytest.approx([6.0, 6.0])


def test_pure_dp_on_elect_flat_is_compute_plus_ring_allreduce():
    # Without gradient buckets the all-reduce follows the backward pass: compute + ring.
    plan = make_plan(MODELS["resnet50"](), device("v100"), 1, 8, 256, None, settings=PlanSettings(bucket_bytes=0))
    fabric = make_fabric(kind="elect-flat", hosts=8, gpu_bandwidth_gbps=100, latency_us=2)
    prediction = predict_plan(plan, fabric)
    compute = prediction.breakdown.compute_s
    ring = ring_allreduce_time_s(8, plan.grad_bytes[0], 100e9, 2e-6)
    assert prediction.iteration_time_s == pytest.approx(compute + ring, rel=1e-6)
    # In 25 MB buckets most of it hides behind the backward pass, never more than all of it.
    overlapped = predict_plan(make_plan(MODELS["resnet50"](), device("v100"), 1, 8, 256, None), fabric)
    assert max(compute, ring) < overlapped.iteration_time_s < compute + ring
    assert dp_allreduce_s(make_fabric(kind="ps", hosts=8, gpu_bandwidth_gbps=100, cpu_servers=0), 1, 8, 1e8) == \
        pytest.approx(ring_allreduce_time_s(8, 1e8, 100e9, 1e-6))


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(2, 10), switches=st.integers(1, 6), seed=st.integers(0, 10**6))
def test_circuits_respect_ports_and_each_switch_is_a_matching(nodes, switches, seed):
    import random

    rng = random.Random(seed)
    traffic = {(a, b): rng.randint(1, 10**6) for a in range(nodes) for b in range(nodes)
               if a != b and rng.random() < 0.4}
    plan = plan_circuits(traffic, nodes, switches, 1e9)
    for node in range(nodes):
        assert plan.degree(node) <= switches
    for q in range(switches):
        senders = [i for (i, j), qs in plan.switch_of.items() for s in qs if s == q]
        receivers = [j for (i, j), qs in plan.switch_of.items() for s in qs if s == q]
        assert len(senders) == len(set(senders)) and len(receivers) == len(set(receivers))
    assert sum(map(len, plan.switch_of.values())) == sum(plan.circuits.values())
    if plan.method == "optimal":
        assert plan.longest_s >= plan.bound_s * (1 - 1e-6)


def test_more_pairs_than_ports_still_fill_the_ports_heaviest_first():
    # 3 GPUs with one port each and all 6 pairs asking: no plan serves every pair, so there is no
    # optimum to take. The heaviest pairs that fit get circuits: 0->1 (600),
    # then 1->2 (500, 0->2 has no transmit port left), then 2->0 (300): a ring, every port used.
    traffic = {(0, 1): 600, (1, 2): 500, (0, 2): 400, (2, 0): 300, (1, 0): 200, (2, 1): 100}
    plan = plan_circuits(traffic, 3, 1, 1e9)
    assert plan.circuits == {(0, 1): 1, (1, 2): 1, (2, 0): 1} and plan.method == "greedy"


def test_a_multi_shot_re_plan_retunes_only_when_it_gains_more_than_the_dark_time():
    # 2 GPUs, 2 switches of 8 Gb/s (1 GB/s): 1 MiB each way (a measured estimate the planners
    # round to a quarter octave: 2^20 stays) takes 1.049 ms on the one circuit each pair holds,
    # 0.524 ms on two. The gain, 0.524 ms, is worth a 0.4 ms dark time, not a 0.6 ms one.
    demand = {(0, 1): 2.0 ** 20, (1, 0): 2.0 ** 20}
    held = {(0, 1): (0,), (1, 0): (1,)}
    kept = replan_circuits(demand, 2, 2, 8e9, held, dark_s=0.6e-3)
    assert kept.method == "kept" and kept.switch_of == held and kept.longest_s == pytest.approx(2 ** 20 / 1e9)
    retuned = replan_circuits(demand, 2, 2, 8e9, held, dark_s=0.4e-3)
    assert retuned.circuits == {(0, 1): 2, (1, 0): 2} and retuned.longest_s == pytest.approx(2 ** 19 / 1e9)


def test_a_re_plan_keeps_each_remaining_circuit_on_its_switch():
    # 3 GPUs, 2 switches. In force: 0->1 and 1->0, both on switch 1. The period also asks for 0->2
    # and 2->0, which have no circuit (an unbounded transfer), so the re-plan retunes: one circuit
    # per pair (node 0 sends to two GPUs and receives from two over its 2 ports). Kept where they
    # are, 0->1 and 1->0 stay on switch 1 and the new pairs take switch 0; coloured afresh, in pair
    # order, 0->1 would move to switch 0 and darken two ports for nothing.
    demand = {(0, 1): 1e6, (1, 0): 1e6, (0, 2): 1e6, (2, 0): 1e6}
    plan = replan_circuits(demand, 3, 2, 8e9, {(0, 1): (1,), (1, 0): (1,)}, dark_s=1e-3)
    assert {pair: plan.switch_of[pair] for pair in demand} == {(0, 1): (1,), (1, 0): (1,), (0, 2): (0,), (2, 0): (0,)}
    assert plan_circuits(demand, 3, 2, 8e9).switch_of[(0, 1)] == (0,)


def test_wavelength_programme_serves_a_pair_the_greedy_first_fit_blocks():
    # 4 GPUs, W = 2, every pair within reach; ties in direction go clockwise. Segment s joins s and
    # s+1. The greedy, heaviest first, first fit: 1->3 (segments 1, 2) takes λ0, 3->0 (3) λ0,
    # 2->3 (2) λ1, 0->2 (0, 1) λ1; 3->1 (3, 0) then finds λ0 taken on 3 and λ1 on 0: no lightpath.
    # With 0->2 on λ0 and 1->3 on λ1, 3->1 fits on λ1: every pair gets one wavelength, and the
    # longest transfer is 13 bytes on one 1 Gb/s wavelength, 104 ns, which is also the bound.
    traffic = {(1, 3): 13.0, (3, 0): 13.0, (2, 3): 8.0, (0, 2): 5.0, (3, 1): 1.0}
    plan = plan_wavelengths(traffic, 4, 2, 1e9, 3)
    assert plan.method == "optimal" and set(plan.lightpaths) == set(traffic)
    assert all(len(path.wavelengths) == 1 for path in plan.lightpaths.values())
    assert plan.longest_s == pytest.approx(104e-9) and plan.bound_s == pytest.approx(104e-9)


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(3, 12), waves=st.integers(1, 8), reach=st.integers(1, 6), seed=st.integers(0, 10**6))
def test_wavelengths_respect_segments_reach_and_interfaces(nodes, waves, reach, seed):
    import random

    rng = random.Random(seed)
    traffic = {(a, b): rng.randint(1, 10**6) for a in range(nodes) for b in range(nodes)
               if a != b and rng.random() < 0.3}
    plan = plan_wavelengths(traffic, nodes, waves, 25e9, reach)
    on_segment = {}
    for path in plan.lightpaths.values():
        segs = segments(path.src, path.dst, path.direction, nodes)
        assert len(segs) <= reach
        for seg in segs:
            for w in path.wavelengths:
                assert (path.direction, seg, w) not in on_segment  # a wavelength once per segment
                on_segment[(path.direction, seg, w)] = path
    for node in range(nodes):
        assert sum(len(p.wavelengths) for p in plan.lightpaths.values() if p.src == node) <= waves
    assert plan.longest_s >= plan.bound_s * (1 - 1e-9)


def test_schedule_simulation_agrees_with_the_formulas_and_the_plan_oracle():
    from testbed.oracle.schedule_sim import simulate_schedule
    from testbed.placer.emit import plan_schedule
    from testbed.planning.scenario_file import parse_scenario
    from testbed.workloads.all_kinds import schedule_for

    scenario = parse_scenario({"name": "c", "fabric": {"kind": "elect-flat", "hosts": 8, "gpu_bandwidth_gbps": 100,
                                                       "latency_us": 5},
                               "workload": {"kind": "collective", "collective": "allreduce", "bytes": 10**8}})
    simulated = simulate_schedule(schedule_for(scenario), scenario.fabric)
    assert simulated.iteration_time_s == pytest.approx(ring_allreduce_time_s(8, 1e8, 100e9, 5e-6))
    plan = make_plan(MODELS["transformer"](), device("v100"), 4, 2, 16, 3)
    fabric = make_fabric(kind="sip-ocs", hosts=8, gpu_bandwidth_gbps=1000, ocs_switches=3)
    by_schedule = simulate_schedule(plan_schedule(plan, "x", 1), fabric).iteration_time_s
    by_plan = predict_plan(plan, fabric).iteration_time_s
    assert by_schedule == pytest.approx(by_plan, rel=0.15)


@pytest.mark.parametrize("model, k", [("transformer", 4), ("resnet50", 8)])
def test_optical_fabrics_never_beat_elect_flat_at_the_same_bandwidth(model, k):
    plan = make_plan(MODELS[model](), device("v100"), k, 2, 32, 16)
    flat = predict_plan(plan, make_fabric(kind="elect-flat", hosts=2 * k, gpu_bandwidth_gbps=400))
    ring = predict_plan(plan, make_fabric(kind="sip-ring", hosts=2 * k, gpu_bandwidth_gbps=400, wavelengths=16,
                                     reconfig_us=25))
    ocs = predict_plan(plan, make_fabric(kind="sip-ocs", hosts=2 * k, gpu_bandwidth_gbps=400, ocs_switches=16))
    assert ring.iteration_time_s >= flat.iteration_time_s * (1 - 0.02)  # 2%: max-min freeze tolerance
    assert ocs.iteration_time_s >= flat.iteration_time_s * (1 - 0.02)
    assert ring.breakdown.reconfiguration_s >= 0


def test_collectives_in_a_schedule_run_at_what_their_ring_gets_on_the_plan():
    from testbed.oracle.fabrics import mp_flow_model
    from testbed.oracle.schedule_sim import collective_rates_bps
    from testbed.placer.emit import plan_schedule

    plan = make_plan(MODELS["resnet50"](), device("v100"), 2, 4, 16, None)
    schedule = plan_schedule(plan, "x", 1)
    steps = [g.steps for g in schedule.gpus]
    traffic = schedule.traffic()
    flat = make_fabric(kind="elect-flat", hosts=8, gpu_bandwidth_gbps=100)
    rates = collective_rates_bps(steps, mp_flow_model(flat, 8, 1, traffic))
    assert {group for _, group in rates} == {(0, 2, 4, 6), (1, 3, 5, 7)}  # the DP rings' gradient buckets
    assert all(ident.startswith("dp-bucket") for ident, _ in rates)
    assert all(r == pytest.approx(100e9) for r in rates.values())  # one flow out of and into each NIC
    # SiP-Ring: GPU g's DP successor g+2 is no ring neighbour; its lightpath gets the wavelengths
    # the ring's own links leave (each GPU keeps one to each neighbour), so less than B.
    ring = make_fabric(kind="sip-ring", hosts=8, gpu_bandwidth_gbps=100, wavelengths=4, wavelength_gbps=25)
    model = mp_flow_model(ring, 8, 1, traffic)
    rates = collective_rates_bps(steps, model)
    lightpath = min(model.capacity_bps[("lightpath", g, (g + 2) % 8)] for g in range(8))
    assert all(r == pytest.approx(lightpath) for r in rates.values()) and lightpath <= 50e9


@pytest.mark.parametrize("n, cpus, share", [
    (4, 0, 1.5),        # a ring all-reduce: 2(n-1)/n
    (4, 2, 1.2),        # 2·4·3 / (16 + 8 - 4) = 24/20
    (4, 1, 24 / 18),    # 24 / (16 + 4 - 2)
    (4, 4, 1.0),        # as many CPU machines as GPU machines: a classic PS, M each way
    (4, 8, 1.0),        # more CPU machines cannot beat a GPU machine's own push and pull
    (8, 2, 112 / 76),   # 2·8·7 / (64 + 16 - 4)
])
def test_byteps_split_carries_what_the_byteps_paper_derives(n, cpus, share):
    assert byteps_bytes_per_machine(n, cpus, 1.0) == pytest.approx(share)


def test_byteps_dp_all_reduce_shares_the_cpu_machines_among_the_mp_ranks():
    """n = 4 DP ranks, 2 CPU machines, 100 MB at 100 Gb/s, α = 5 µs. With k = 1 each machine
    carries 1.2·M: 6α + 9.6 ms. With k = 2 MP ranks, two all-reduces share the CPU machines, as if
    each had one: 24/18·M, 6α + 10.667 ms. Never below M/B = 8 ms."""
    fabric = make_fabric(kind="ps", hosts=8, gpu_bandwidth_gbps=100, latency_us=5, cpu_servers=2)
    assert dp_allreduce_s(fabric, 1, 4, 100e6) == pytest.approx(30e-6 + 9.6e-3)
    assert dp_allreduce_s(fabric, 2, 4, 100e6) == pytest.approx(30e-6 + 8e-3 * 24 / 18)
    assert dp_allreduce_s(fabric.model_copy(update={"cpu_servers": 16}), 1, 4, 100e6) == pytest.approx(30e-6 + 8e-3)


def test_a_dp_circuit_takes_a_receive_port_of_its_gpu():
    """k = 2, Q = 2: GPU 1 sends to GPU 0, and every GPU is in a DP ring. GPU 0 receives the MP
    circuit and the circuit from its counterpart in the previous group, so it has one port left
    for each: {(1, 0): 1} and one DP circuit per GPU. (Planned with the counterpart as a separate
    node, GPU 0's DP ring got two circuits and GPU 0 three receive circuits on two ports.)"""
    plan = plan_circuits({(1, 0): 10.0}, 2, 2, 1e9, ring_demand={0: 10.0, 1: 10.0})
    assert plan.circuits == {(1, 0): 1, (0, 0): 1, (1, 1): 1}


@pytest.mark.parametrize("switches", [4, 8])
def test_sip_ocs_plans_fit_every_gpus_ports_with_its_dp_ring(switches):
    """The Transformer at k = 8, l = 2: MP circuits into a GPU plus its counterpart's DP circuit
    never exceed its Q receive ports, nor MP out plus DP out its Q transmit ports."""
    plan = make_plan(MODELS["transformer"](), device("v100"), 8, 2, 32, switches)
    fabric = make_fabric(kind="sip-ocs", hosts=16, gpu_bandwidth_gbps=400, ocs_switches=switches)
    model = mp_flow_model(fabric, plan.k, plan.l, plan.mp_traffic, dp_ring_bytes(plan))
    link = 400e9 / switches
    assert model.dp_rate_bps and model.dp_rate_bps >= link
    dp = round(model.dp_rate_bps / link)
    for g in range(8):
        out = sum(round(c / link) for r, c in model.capacity_bps.items() if r[0] == "circuit" and r[1] == g)
        into = sum(round(c / link) for r, c in model.capacity_bps.items() if r[0] == "circuit" and r[2] == g)
        assert out + dp <= switches and into + dp <= switches, (g, out, into, dp)


def test_a_dark_window_pauses_flows_under_way_and_frees_their_share():
    from testbed.network.flows import DarkWindow

    caps = {"x": 1e6, "y": 1e9}
    one_s = 125_000  # bytes: 1 Mbit, one second at 1 Mb/s
    # Under way when its link goes dark from 0.5 s to 0.8 s: 1.0 s of sending ends at 1.3 s.
    assert completion_times([Flow(0, one_s, ("x",))], caps, (DarkWindow(0.5, 0.8, frozenset({"x"})),)) == \
        pytest.approx([1.3])
    # Starting inside the window, it waits for the end: 0.8 + 1.0.
    assert completion_times([Flow(0.6, one_s, ("x",))], caps, (DarkWindow(0.5, 0.8, frozenset({"x"})),)) == \
        pytest.approx([1.8])
    # Two flows share x; the second also crosses y, dark for the first second. The first has x to
    # itself and is done at 1.0 s; the second then sends its 1 Mbit alone: 2.0 s. Without the
    # window both share x and finish at 2.0 s.
    flows = [Flow(0, one_s, ("x",)), Flow(0, one_s, ("x", "y"))]
    assert completion_times(flows, caps, (DarkWindow(0.0, 1.0, frozenset({"y"})),)) == pytest.approx([1.0, 2.0])
    assert completion_times(flows, caps) == pytest.approx([2.0, 2.0])


@pytest.mark.parametrize("kind, options", [
    ("sip-ring", {"wavelengths": 16, "estimate_period_us": 1000}),
    ("sip-ocs", {"ocs_switches": 3, "multi_shot": True, "estimate_period_us": 1000}),
])
def test_dark_time_never_shortens_the_placers_estimate(kind, options):
    """SiP-ML §3.3: a retuned lightpath or circuit carries nothing while it retunes. The issue's
    case: at a 1,000 µs period a 1,000 µs retune predicted less than none. The placer's estimate
    charges each retune its dark time and credits none of its gain, so a longer dark time, which
    the controller's rule retunes for less often, may cost less in all than a shorter one: it is
    never below none. (The simulation a run is judged against is monotone in the dark time by
    construction: test_replanning_sim.)"""
    plan = make_plan(MODELS["transformer"](), device("v100"), 8, 2, 32, 4)
    times, dark = [], []
    for reconfig in (0, 25, 250, 500, 1000):
        fabric = make_fabric(kind=kind, hosts=16, gpu_bandwidth_gbps=400, reconfig_us=reconfig, **options)
        prediction = predict_plan(plan, fabric)
        times.append(prediction.iteration_time_s)
        dark.append(prediction.breakdown.reconfiguration_s)
    assert all(time >= times[0] for time in times) and times[-1] > times[0]
    # The time spent dark need not grow: a longer retune is worth making less often, so the
    # controller makes fewer (SiP-OCS at 1,000 µs: 11 re-plans retune, against 35 at 25 µs).
    assert dark[0] == 0 and all(d > 0 for d in dark[1:])


def test_one_shot_sip_ocs_ignores_the_reconfiguration_time_and_multi_shot_pays_it():
    plan = make_plan(MODELS["transformer"](), device("v100"), 8, 2, 32, 4)
    def predicted(**options):
        fabric = make_fabric(kind="sip-ocs", hosts=16, gpu_bandwidth_gbps=400, ocs_switches=3, **options)
        return predict_plan(plan, fabric)
    one_shot = predicted(reconfig_us=10)
    assert predicted(reconfig_us=10_000).iteration_time_s == one_shot.iteration_time_s
    assert one_shot.breakdown.reconfiguration_s == 0
    # Multi-shot holds circuits for its period (by default 10 × the reconfiguration, SiP-ML §3.1's
    # 90% duty cycle): at 10 µs it re-plans every 100 µs and pays for the retunes it makes.
    multi = predicted(reconfig_us=10, multi_shot=True)
    assert multi.breakdown.reconfiguration_s > 0
    assert multi.iteration_time_s != one_shot.iteration_time_s


def test_sip_ring_pure_dp_ring_gets_what_the_collective_path_and_controller_give_it():
    """W = 4 wavelengths: the controller keeps one towards the other neighbour, so a one-way ring
    carries 3/4 of B, both when a placed plan's DP ring and a ring all-reduce scenario predict it.
    By hand: 2(n-1)·α + 2(n-1)/n·M/(0.75·B) with n = 8, M = 100 MB, B = 100 Gb/s, α = 5 µs."""
    from testbed.workloads.collective.predict import _ring_on_fabric

    fabric = make_fabric(kind="sip-ring", hosts=8, gpu_bandwidth_gbps=100, wavelengths=4, latency_us=5)
    by_hand = 2 * 7 * 5e-6 + 2 * 7 / 8 * 100e6 * 8 / (0.75 * 100e9)
    assert dp_allreduce_s(fabric, 1, 8, 100e6) == pytest.approx(by_hand, rel=1e-9)
    collective = _ring_on_fabric("allreduce", 8, 100e6, fabric, {}).iteration_time_s
    assert collective == pytest.approx(by_hand, rel=0.02)  # max-min sharing freezes within 1%


def test_an_mp_group_on_sip_ring_is_a_block_of_the_ring_not_a_ring_of_its_own():
    """GPUs 0..3 of 4 groups on a 16-GPU ring with reach 1: GPU 3 to GPU 0 is 3 hops back through
    GPUs 2 and 1 (a lightpath per hop); only a job alone on the ring has them as neighbours."""
    fabric = make_fabric(kind="sip-ring", hosts=16, gpu_bandwidth_gbps=100, wavelengths=4, neighbors=1)
    traffic = {(3, 0): 1e6, (0, 1): 1e6}
    alone = mp_flow_model(fabric, 4, 1, traffic)
    assert alone.resources(3, 0) == (("lightpath", 3, 0),)
    block = mp_flow_model(fabric, 4, 4, traffic)
    assert block.resources(3, 0) == (("lightpath", 3, 2), ("lightpath", 2, 1), ("lightpath", 1, 0))


def test_a_circuit_plan_keeps_every_pair_reachable_when_ports_run_out():
    """Two heavy pairs each way ({0, 1} and {2, 3}) take a GPU's only port; the light pair 0 → 2
    would have no path. The plan then lays a ring 0 → 1 → 2 → 3 → 0 first and relays over it."""
    from testbed.network.flow_model import relay_paths
    traffic = {(0, 1): 1e9, (1, 0): 1e9, (2, 3): 1e9, (3, 2): 1e9, (0, 2): 1e3}
    plan = plan_circuits(traffic, 4, 1, 1e9)
    assert plan.circuits == {(0, 1): 1, (1, 2): 1, (2, 3): 1, (3, 0): 1}
    links = {pair: ("circuit", *pair) for pair in plan.circuits}
    assert len(relay_paths(4, links, traffic)[(1, 0)]) == 3  # 1 → 2 → 3 → 0

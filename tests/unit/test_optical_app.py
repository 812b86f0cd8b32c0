"""The SiP-OCS/SiP-Ring os-ken app against a fake switch that records FlowMods and answers barriers,
and a fake timer that records what the hosts are told (Faucet style, no root): a reconnecting switch
loses stale rules, the hosts leave a link before the switch drops it, a restore that needs a
re-pointed port waits for its barrier, and a bad request from a controller script changes nothing.
The real timer and switches are exercised by the root tests (test_optical_fabrics)."""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass

import pytest
from os_ken.ofproto import ofproto_v1_3, ofproto_v1_3_parser

from controller import optical_app
from testbed.fabrics import programming
from testbed.fabrics.rendering import PlanError
from testbed.fabrics.topology import build_topology
from testbed.model.contracts import ControllerConfig
from testbed.model.fabric_section import FabricSection
from testbed.model.schedule import cut_pairs
from testbed.planning.overrides import apply_overrides
from testbed.planning.scenario_file import load_scenario, make_fabric
from testbed.workloads.all_kinds import schedule_for

from ..conftest import ROOT

SEQUENCE = itertools.count()  # one clock for the switch's and the hosts' records: their order


@dataclass
class _Msg:
    datapath: object
    xid: int = 0
    datapath_id: int | None = None  # a features reply's
    flags: int = 0  # a multipart reply's
    body: tuple = ()


@dataclass
class _Event:
    msg: _Msg


class FakeDatapath:
    """Records every message; answers a barrier request (through the app's handler) at once, or
    when `release()` is called if `hold_barriers` is set."""

    ofproto = ofproto_v1_3
    ofproto_parser = ofproto_v1_3_parser

    def __init__(self, dpid: int) -> None:
        self.id = dpid
        self.app = None
        self.sent: list[tuple[int, object]] = []
        self.xids = itertools.count(1)
        self.hold_barriers = False
        self.held: list[int] = []

    def set_xid(self, msg) -> None:
        msg.xid = next(self.xids)

    def send_msg(self, msg) -> None:
        if getattr(msg, "xid", None) is None:
            self.set_xid(msg)
        self.sent.append((next(SEQUENCE), msg))
        if isinstance(msg, ofproto_v1_3_parser.OFPBarrierRequest) and self.app is not None:
            if self.hold_barriers:
                self.held.append(msg.xid)
            else:
                self.app.on_barrier(_Event(_Msg(self, msg.xid)))

    def release(self) -> None:
        for xid in self.held:
            self.app.on_barrier(_Event(_Msg(self, xid)))
        self.held.clear()

    def flow_mods(self, command: int | None = None) -> list[tuple[int, object]]:
        return [(seq, m) for seq, m in self.sent if isinstance(m, ofproto_v1_3_parser.OFPFlowMod)
                and (command is None or m.command == command)]


class FakeTimer:
    """The hosts' side: records each scheduled phase; reports it done at once."""

    def __init__(self) -> None:
        self.scheduled: list[tuple[int, int, str, dict]] = []  # (sequence, id, phase, lines)
        self.waited: list[tuple[int, int, str]] = []
        self.on_schedule = lambda phase: None

    def schedule(self, ident: int, *steps) -> None:
        for phase, lines, _when in steps:
            self.scheduled.append((next(SEQUENCE), ident, phase, lines))
            self.on_schedule(phase)

    def wait(self, ident: int, phase: str, timeout_s: float) -> dict:
        self.waited.append((next(SEQUENCE), ident, phase))
        return {"at_s": 1.0, "begun_s": 1.0, "early_s": 0.0, "done_s": {"0": 1.0005}}


@pytest.fixture
def ocs_app(tmp_path, monkeypatch):
    """A SiP-OCS app of 4 GPUs on 2 circuit switches, planned for a ring all-reduce."""
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "ocs-allreduce.yaml"), {"fabric.hosts": 4})
    return _app(tmp_path, monkeypatch, scenario.fabric, schedule_for(scenario))


def _app(tmp_path, monkeypatch, fabric: FabricSection, schedule, byte_scale: float = 1.0):
    topology = build_topology(fabric, "ab12", 40e6, "user")
    (tmp_path / "topology.json").write_text(topology.dumps())
    (tmp_path / "schedule.json").write_text(json.dumps(schedule.to_json()))
    config = ControllerConfig(topology=str(tmp_path / "topology.json"), schedule=str(tmp_path / "schedule.json"),
                              ready=str(tmp_path / "controller.ready"), events=str(tmp_path / "events.jsonl"),
                              host_pids=str(tmp_path / "never-written.json"), host_logs=str(tmp_path / "logs"),
                              fabric=fabric.model_dump(exclude_unset=True), dilation=400.0,
                              byte_scale=byte_scale)
    (tmp_path / "config.json").write_text(config.dumps())
    monkeypatch.setenv(optical_app.CONFIG_ENV, str(tmp_path / "config.json"))
    monkeypatch.setattr(optical_app, "LEAD_S", 0.0)
    app = optical_app.OpticalFabricApp()  # its host start-up thread waits for PIDs that never come
    app.timer = FakeTimer()
    app.datapaths_fake = {}
    for switch in topology.switches:
        dp = FakeDatapath(int(switch.dpid))
        dp.app = app
        app.datapaths_fake[dp.id] = dp
        app.on_features(_Event(_Msg(dp)))
    return app


def test_the_traffic_matrix_counts_emulated_bytes(tmp_path, monkeypatch):
    """Counters of wall bytes at byte scale 0.25: 1,000 + 500 wall bytes from GPU 0 to GPU 1 over two
    switches are 6,000 emulated bytes; the next period adds 250 wall bytes, 1,000 emulated."""
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "ocs-allreduce.yaml"), {"fabric.hosts": 4})
    app = _app(tmp_path, monkeypatch, scenario.fabric, schedule_for(scenario), byte_scale=0.25)
    ip = {h.rank: h.ip for h in app.topology.hosts}
    app.counters = {(1, ip[0], ip[1]): 1000, (2, ip[0], ip[1]): 500, (1, "10.9.9.9", ip[1]): 700}
    app._close_period()
    assert app.last_period[0][1] == 6000.0 and app.total[0][1] == 6000.0
    assert sum(map(sum, app.total)) == 6000.0
    app.counters[(1, ip[0], ip[1])] = 1250
    app._close_period()
    assert app.last_period[0][1] == 1000.0 and app.total[0][1] == 7000.0
    assert app.traffic()["byte_scale"] == 0.25


def _stats_requests(dp) -> int:
    return sum(isinstance(m, ofproto_v1_3_parser.OFPFlowStatsRequest) for _, m in dp.sent)


def test_a_switch_is_asked_for_its_counters_again_only_once_it_answered(ocs_app):
    dp = next(iter(ocs_app.datapaths_fake.values()))
    ocs_app._request_counters()
    ocs_app._request_counters()  # the first answer has not come: no second request piles up behind it
    assert _stats_requests(dp) == 1
    more = ofproto_v1_3.OFPMPF_REPLY_MORE
    for flags in (more, 0):  # a reply in two parts: answered with the last one
        ocs_app.on_flow_stats(_Event(_Msg(dp, flags=flags)))
        ocs_app._request_counters()
    assert _stats_requests(dp) == 2
    ocs_app.on_features(_Event(_Msg(dp)))  # reconnected: the pending request's answer is lost with it
    ocs_app._request_counters()
    assert _stats_requests(dp) == 3


def test_a_reconnecting_switch_starts_from_an_empty_table(ocs_app):
    dp = next(iter(ocs_app.datapaths_fake.values()))
    ofp = ofproto_v1_3
    for _ in range(2):  # first connection, then a reconnection
        dp.sent.clear()
        ocs_app.on_features(_Event(_Msg(dp)))
        first = dp.sent[0][1]
        assert isinstance(first, ofproto_v1_3_parser.OFPFlowMod)
        assert first.command == ofp.OFPFC_DELETE and first.table_id == ofp.OFPTT_ALL
        installed = {str(m.match) for _, m in dp.flow_mods(ofp.OFPFC_ADD) if m.table_id == optical_app.FORWARD_TABLE}
        assert len(installed) == len(ocs_app.rendering.rules.get(dp.id, ()))  # the current plan, whole
        assert isinstance(dp.sent[-1][1], ofproto_v1_3_parser.OFPBarrierRequest)


def _moved(app) -> dict:
    """The current circuits with two on one switch swapping destinations (every port keeps one
    circuit), chosen so that every pair the job needs still has a path."""
    circuits = sorted(app.state)
    for (sw1, a, b), (sw2, c, d) in itertools.combinations(circuits, 2):
        if sw1 != sw2 or a == d or c == b:
            continue
        state = {key: 1 for key in circuits if key not in ((sw1, a, b), (sw2, c, d))}
        state.update({(sw1, a, d): 1, (sw1, c, b): 1})
        rendering = programming.render(app.topology, state)
        if not cut_pairs(rendering.unreachable, app.schedule_traffic):
            return state
    raise AssertionError("no swap keeps the job connected")


def test_hosts_leave_a_link_before_the_switch_drops_it_and_the_restore_waits_for_its_barrier(ocs_app):
    wanted = _moved(ocs_app)
    for dp in ocs_app.datapaths_fake.values():
        dp.sent.clear()
        dp.hold_barriers = True
    timer = ocs_app.timer
    ident = ocs_app.submit(wanted, source="test")
    reconfiguring = threading.Thread(target=ocs_app._reconfigure, args=(wanted, "test", ident))
    released = threading.Event()

    def release_when_asked():  # the switches confirm only when the test says so
        while not released.is_set():
            for dp in ocs_app.datapaths_fake.values():
                if dp.held:
                    seq_before = next(SEQUENCE)
                    dp.release()
                    releases.append(seq_before)
            released.wait(0.01)

    releases: list[int] = []
    confirmer = threading.Thread(target=release_when_asked, daemon=True)
    reconfiguring.start()
    confirmer.start()
    reconfiguring.join(timeout=30)
    released.set()
    assert not reconfiguring.is_alive()
    phases = [(seq, phase) for seq, i, phase, _ in timer.scheduled if i == ident]
    dark_seq = next(seq for seq, phase in phases if phase == "dark")
    restore_seq = next(seq for seq, phase in phases if phase == "restore")
    deletes = [seq for dp in ocs_app.datapaths_fake.values()
               for seq, _ in dp.flow_mods(ofproto_v1_3.OFPFC_DELETE_STRICT)]
    assert deletes, "the moved circuit's old rule was never deleted"
    # The hosts were told to leave the link (and reported it) before any switch dropped it.
    dark_reported = next(seq for seq, i, phase in timer.waited if i == ident and phase == "dark")
    assert dark_seq < dark_reported < min(deletes)
    # A port given a new peer is confirmed by its switch before the restore goes to the hosts.
    barrier_answers = [seq for seq in releases if seq > min(deletes)]
    assert barrier_answers and min(barrier_answers) < restore_seq
    event = json.loads(ocs_app.events_path.read_text().splitlines()[-1])
    assert event["id"] == ident and ocs_app.state == {k: 1 for k in wanted}


@pytest.mark.parametrize("bad, words", [
    ("port", "transmits on more than one circuit"),
    ("cut", "leaves no path"),
])
def test_a_bad_request_changes_nothing(ocs_app, bad, words):
    before_state, before_events = dict(ocs_app.state), list(ocs_app.reconfig_events)
    sent_before = {dpid: len(dp.sent) for dpid, dp in ocs_app.datapaths_fake.items()}
    if bad == "port":  # GPU 0 would transmit on two circuits of one switch
        wanted = {**ocs_app.state, (0, 0, 2): 1, (0, 0, 3): 1}
    else:  # no circuit at all: GPUs that exchange data would have no path
        wanted = {}
    with pytest.raises(PlanError, match=words):
        ocs_app.submit(wanted, source="script")
    assert ocs_app.state == before_state and ocs_app.reconfig_events == before_events
    assert ocs_app.requests.empty() and not ocs_app.timer.scheduled
    assert {dpid: len(dp.sent) for dpid, dp in ocs_app.datapaths_fake.items()} == sent_before


def test_a_request_that_an_earlier_one_carried_out_is_reported_unchanged(ocs_app):
    ident = ocs_app.next_id
    ocs_app._reconfigure(dict(ocs_app.state), "script", ident)  # what the plan already is
    assert ocs_app.reconfig_events[-1] == {"kind": "unchanged", "id": ident, "source": "script"}
    assert not ocs_app.timer.scheduled


def _flat_app(tmp_path, monkeypatch, fabric: FabricSection):
    """The flat fabric's app for `fabric`, with its topology."""
    from controller import flat_app

    topology = build_topology(fabric, "ab12", 40e6, "user")
    (tmp_path / "topology.json").write_text(topology.dumps())
    (tmp_path / "config.json").write_text(ControllerConfig(
        topology=str(tmp_path / "topology.json"), ready=str(tmp_path / "controller.ready"),
        host_pids=str(tmp_path / "never-written.json"), host_logs=str(tmp_path / "logs"),
        fabric=fabric.model_dump(exclude_unset=True)).dumps())
    monkeypatch.setenv(flat_app.CONFIG_ENV, str(tmp_path / "config.json"))
    app = flat_app.FlatFabricApp()
    return app, topology


def test_the_flat_app_clears_a_reconnecting_switch_and_is_ready_once_every_switch_confirmed(tmp_path, monkeypatch):
    fabric = make_fabric(kind="elect-cluster", hosts=4, gpu_bandwidth_gbps=100, gpus_per_server=2,
                         server_uplink_gbps=100)
    app, topology = _flat_app(tmp_path, monkeypatch, fabric)
    switches = [FakeDatapath(int(s.dpid)) for s in topology.switches]
    assert len(switches) > 1
    for dp in switches:
        dp.app = app
        dp.hold_barriers = True
        for _ in range(2):  # a connection, then a reconnection: each starts from empty tables
            dp.sent.clear()
            app.on_features(_Event(_Msg(dp)))
            first = dp.sent[0][1]
            assert first.command == ofproto_v1_3.OFPFC_DELETE and first.table_id == ofproto_v1_3.OFPTT_ALL
            assert len(dp.flow_mods(ofproto_v1_3.OFPFC_ADD)) == len(app.plan[dp.id])
    for dp in switches[:-1]:
        dp.release()
    assert not (tmp_path / "controller.ready").exists()  # one switch has not confirmed its rules yet
    switches[-1].release()
    assert json.loads((tmp_path / "controller.ready").read_text())["switches"] == sorted(d.id for d in switches)


def test_a_switch_is_programmed_when_our_handler_runs_before_os_kens_sets_its_id(tmp_path, monkeypatch):
    """os-ken sets `datapath.id` from the features reply in its own thread; under a slow CPU the
    app's handler ran first, saw None and ignored the switch, and the fabric never became ready."""
    fabric = make_fabric(kind="elect-flat", hosts=2, gpu_bandwidth_gbps=100)
    app, topology = _flat_app(tmp_path, monkeypatch, fabric)
    dpid = int(topology.switches[0].dpid)
    dp = FakeDatapath(dpid)
    dp.id = None
    dp.app = app
    app.on_features(_Event(_Msg(dp, datapath_id=dpid)))
    assert dp.id == dpid and len(dp.flow_mods(ofproto_v1_3.OFPFC_ADD)) == len(app.plan[dpid])
    assert json.loads((tmp_path / "controller.ready").read_text())["switches"] == [dpid]

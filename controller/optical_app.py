"""os-ken shim for SiP-OCS and SiP-Ring: installs the link state, measures the traffic matrix from
switch counters, re-plans by policy, and carries out reconfigurations with their dark time."""

from __future__ import annotations

import json
import math
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3

from controller import host_shell, reconfig
from controller.policy import POLICIES, default_policy
from controller.shim import CONFIG_ENV, clear_tables, fail_loudly, featured_datapath, guarded
from testbed.fabrics import programming
from testbed.fabrics.programming import init_lines, plan_for
from testbed.fabrics.rendering import FORWARD_TABLE, PlanError, Rendering, count_rules, hold, rto_min_ms
from testbed.fabrics.timing import dark_us, estimate_period_us, retune_threshold_us
from testbed.model.contracts import ControllerConfig, ControllerReady, Topology
from testbed.model.schedule import cut_pairs, traffic_pairs
from testbed.model.units import us_to_s
from testbed.network.link_planner import payload_demand
from testbed.planning.scenario_file import make_fabric

BARRIER_TIMEOUT_S = 5.0
COUNTER_WAIT_PERIODS = 0.5  # how long a period's end waits for the switches' counters, in periods
LEAD_S = 2e-3  # from asking the timer to the dark start: time for the request to reach it
HOST_REPORT_TIMEOUT_S = 15.0


def next_period_end(last_end_s: float, period_s: float, now_s: float) -> float:
    """The next instant of the period grid after `last_end_s` that is still ahead of `now_s` (a
    period whose end was missed, while the last one's planning ran long, is merged into the next)."""
    missed = max(0, math.floor((now_s - last_end_s) / period_s))
    return last_end_s + (missed + 1) * period_s


class OpticalFabricApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        config = ControllerConfig.loads(Path(os.environ[CONFIG_ENV]).read_text(), where=os.environ[CONFIG_ENV])
        if config.dilation is None or config.schedule is None or config.events is None:
            raise ValueError("a reconfigurable fabric's controller needs the dilation, the schedule and an events file")
        self.run_config = config
        self.topology = Topology.loads(Path(config.topology).read_text(), where=config.topology)
        self.fabric = make_fabric(os.environ[CONFIG_ENV], **config.fabric)
        self.dilation = config.dilation
        self.byte_scale = config.byte_scale
        # Under software emulation switches confirm and hosts report many times later than here.
        self.barrier_timeout_s = BARRIER_TIMEOUT_S * config.slowness
        self.host_report_timeout_s = HOST_REPORT_TIMEOUT_S * config.slowness
        self.ready_path = Path(config.ready)
        self.events_path = Path(config.events)
        self.n = len(self.topology.hosts)
        schedule = json.loads(Path(config.schedule).read_text())
        self.schedule_traffic = traffic_pairs(schedule.get("traffic_matrix_bytes"))
        self.recurring = tuple(sorted(self.schedule_traffic))
        # job_sharing: partitioned: each job's GPUs, which plan their own share of the fabric
        self.partitions = tuple(tuple(group) for group in schedule.get("partitions", ()))
        self.lock = threading.RLock()
        # reconfig_us here is the dark window the controller holds: the scenario's, or the longer one
        # the prediction picked for it (timing.dark_us)
        self.settings = {"policy": default_policy(self.fabric), "reconfig_us": dark_us(self.fabric),
                         "retune_threshold_us": retune_threshold_us(self.fabric),
                         "estimate_period_us": estimate_period_us(self.fabric)}
        self.state = reconfig.normalise(plan_for(self.topology, self.fabric, self.schedule_traffic, self.recurring,
                                                 partitions=self.partitions) if self.schedule_traffic else {})
        self.rendering = self._render(self.state)
        self.count_plan = count_rules(self.topology)
        self.datapaths: dict[int, Any] = {}  # os-ken datapaths, untyped
        self.programmed: set[int] = set()
        self.barriers: dict[tuple[int, int], threading.Event] = {}
        self.counters: dict[tuple[int, str, str], int] = {}
        self.stats_pending: set[int] = set()  # switches whose flow counters were asked for and not yet sent
        self.stats_answered = threading.Event()  # every switch asked has sent its counters
        self.ip_rank = {h.ip: h.rank for h in self.topology.hosts}
        self.total = [[0.0] * self.n for _ in range(self.n)]
        self.last_period = [[0.0] * self.n for _ in range(self.n)]
        self.reconfig_events: list[dict] = []
        self.requests: queue.Queue = queue.Queue()
        self.next_id = 1
        self.busy = False
        self.hosts_ready = False
        self.timer: host_shell.HostTimer | None = None
        self.api_port: int | None = None
        threading.Thread(target=guarded, args=("configuring hosts", self._start_hosts), daemon=True).start()

    # ---- switches -------------------------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev):
        try:
            dp = featured_datapath(ev)
            if dp.id not in self.count_plan:
                self.logger.warning("ignoring unknown switch %016x", dp.id)
                return
            parser = dp.ofproto_parser
            clear_tables(dp)
            goto = [parser.OFPInstructionGotoTable(FORWARD_TABLE)]
            dp.send_msg(parser.OFPFlowMod(dp, table_id=0, priority=0, match=parser.OFPMatch(), instructions=goto))
            for rule in self.count_plan[dp.id]:
                dp.send_msg(parser.OFPFlowMod(dp, table_id=0, priority=rule.priority,
                                              match=parser.OFPMatch(**rule.match_dict()), instructions=goto))
            with self.lock:
                self.datapaths[dp.id] = dp
                self.stats_pending.discard(dp.id)  # a reconnected switch answers no earlier request
                for rule in self.rendering.rules.get(dp.id, ()):
                    self._flow(dp, rule, add=True)
            dp.send_msg(parser.OFPBarrierRequest(dp))
        except Exception:
            fail_loudly("programming a switch")

    def _flow(self, dp, rule, add: bool) -> None:
        parser, ofp = dp.ofproto_parser, dp.ofproto
        match = parser.OFPMatch(**rule.match_dict())
        if add:
            actions = [parser.OFPActionOutput(rule.out_port)]
            apply = parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)
            dp.send_msg(parser.OFPFlowMod(dp, table_id=rule.table, priority=rule.priority, match=match,
                                          instructions=[apply]))
        else:
            dp.send_msg(parser.OFPFlowMod(dp, table_id=rule.table, command=ofp.OFPFC_DELETE_STRICT,
                                          priority=rule.priority, match=match, out_port=ofp.OFPP_ANY,
                                          out_group=ofp.OFPG_ANY))

    # The switch answers the barrier sent with the features reply at once; os-ken may still have the
    # datapath in CONFIG_DISPATCHER then (another thread moves it to MAIN), and a reply dispatched
    # in that state reached no MAIN-only handler: the fabric was never reported programmed.
    @set_ev_cls(ofp_event.EventOFPBarrierReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def on_barrier(self, ev):
        try:
            dp = ev.msg.datapath
            waiter = self.barriers.pop((dp.id, ev.msg.xid), None)
            if waiter is not None:
                waiter.set()
                return
            self.programmed.add(dp.id)
            self._maybe_ready()
        except Exception:
            fail_loudly("recording readiness")

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def on_flow_stats(self, ev):
        try:
            dpid = ev.msg.datapath.id
            for stat in ev.msg.body:
                fields = dict(stat.match.items())
                if "ipv4_src" in fields and "ipv4_dst" in fields:
                    self.counters[(dpid, fields["ipv4_src"], fields["ipv4_dst"])] = stat.byte_count
            if not ev.msg.flags & ev.msg.datapath.ofproto.OFPMPF_REPLY_MORE:
                self.stats_pending.discard(dpid)
                if not self.stats_pending:
                    self.stats_answered.set()
        except Exception:
            fail_loudly("reading flow counters")

    def _request_counters(self) -> None:
        """Ask every switch for its flow counters, unless its answer to the last request is still on
        its way: on a slow machine the replies to a short period's requests outran what this process
        parsed, and barrier replies queued behind them for 20 s (a retune waited that long)."""
        self.stats_answered.clear()
        for dpid, dp in list(self.datapaths.items()):
            if dpid not in self.stats_pending:
                self.stats_pending.add(dpid)
                dp.send_msg(dp.ofproto_parser.OFPFlowStatsRequest(dp, table_id=0))
        if not self.stats_pending:
            self.stats_answered.set()

    def _barrier(self, dpids) -> None:
        waiters = []
        for dpid in dpids:
            dp = self.datapaths[dpid]
            dp.set_xid(msg := dp.ofproto_parser.OFPBarrierRequest(dp))
            event = threading.Event()
            self.barriers[(dpid, msg.xid)] = event
            dp.send_msg(msg)
            waiters.append(event)
        for event in waiters:
            if not event.wait(self.barrier_timeout_s):
                raise RuntimeError(f"a switch did not confirm its rules within {self.barrier_timeout_s:.0f} s")

    # ---- hosts ----------------------------------------------------------------------------------
    def _start_hosts(self) -> None:
        pids_path = Path(self.run_config.host_pids)
        while not pids_path.exists():
            time.sleep(0.02)
        pids = json.loads(pids_path.read_text())
        init = init_lines(self.topology)
        for rank, pid in enumerate(pids):
            lines = init[rank] + [line for text in self.rendering.host_lines.get(rank, {}).values()
                                  for line in text.split("\n")]
            host_shell.run_once(pid, lines, "tc")
            host_shell.run_once(pid, lines, "ip")
        self.timer = host_shell.HostTimer(pids, Path(self.run_config.host_logs))
        self._start_api()
        self.hosts_ready = True
        threading.Thread(target=guarded, args=("reconfiguring", self._reconfigure_loop), daemon=True).start()
        threading.Thread(target=guarded, args=("estimating traffic", self._estimate_loop), daemon=True).start()
        self._maybe_ready()

    def _maybe_ready(self) -> None:
        with self.lock:
            if not self.hosts_ready or not self.programmed >= set(self.count_plan) or self.ready_path.exists():
                return
            tmp = self.ready_path.with_suffix(".tmp")
            tmp.write_text(ControllerReady(switches=sorted(self.programmed), time=time.time(),
                                           api=f"http://127.0.0.1:{self.api_port}",
                                           unreachable=list(self.rendering.unreachable)).dumps())
            tmp.replace(self.ready_path)

    def _start_api(self) -> None:
        from controller.northbound import serve

        server = serve(self)
        self.api_port = server.server_address[1]

    # ---- traffic estimation and policy ----------------------------------------------------------
    def _close_period(self) -> None:
        """Fold the switches' latest byte counters into the traffic matrices, in emulated bytes."""
        matrix = [[0.0] * self.n for _ in range(self.n)]
        for (_, src, dst), count in list(self.counters.items()):
            if src in self.ip_rank and dst in self.ip_rank:
                # The counters count scaled-down wall bytes; the planners weigh emulated bytes against
                # the emulated link rate and dark time, or a smaller byte scale would hide every gain.
                matrix[self.ip_rank[src]][self.ip_rank[dst]] += count / self.byte_scale
        with self.lock:
            self.last_period = [[matrix[i][j] - self.total[i][j] for j in range(self.n)] for i in range(self.n)]
            self.total = matrix

    def _estimate_loop(self) -> None:
        # Periods end on a fixed grid, as the oracle's do: sleeping a period after each re-plan
        # stretched every period by the time its counters and planning took (about 4% at 100 µs).
        period_s = us_to_s(self.settings["estimate_period_us"]) * self.dilation
        period_end = time.monotonic()
        while True:
            wanted_s = us_to_s(self.settings["estimate_period_us"]) * self.dilation
            if wanted_s != period_s:  # changed through the API: a new grid from now
                period_s, period_end = wanted_s, time.monotonic()
            period_end = next_period_end(period_end, period_s, time.monotonic())
            time.sleep(max(0.0, period_end - time.monotonic()))
            # The period's own counters, not the last request's: planning from the period before
            # would follow each phase of the traffic one period late (the oracle plans as this does).
            self._request_counters()
            self.stats_answered.wait(period_s * COUNTER_WAIT_PERIODS)
            self._close_period()
            policy = self.settings["policy"]
            if policy == "one-shot" or self.busy or not self.requests.empty():
                continue
            demand = payload_demand(traffic_pairs(self.last_period if policy == "multi-shot" else self.total))
            if demand:
                wanted = reconfig.normalise(plan_for(self.topology, self.fabric, demand, self.recurring, self.state,
                                                     us_to_s(max(self.settings["reconfig_us"],
                                                                 self.settings["retune_threshold_us"])),
                                                     self.partitions))
                if wanted == self.state:  # most periods: no re-plan is worth its dark time
                    continue
                # A plan that leaves a pair the job needs without a path (the period's traffic gives
                # more pairs than ports, and relays do not join them all) would stall its TCP.
                if not cut_pairs(self._render(wanted).unreachable, self.schedule_traffic):
                    with self.lock:
                        ident = self.next_id
                        self.next_id += 1
                    self.requests.put((wanted, "policy", ident, period_end))

    # ---- reconfiguration ------------------------------------------------------------------------
    def submit(self, wanted: dict, source: str = "api") -> int | None:
        """Validate and queue a link state; returns the id its reconfiguration event will carry, or
        None when it equals the current state."""
        programming.validate(self.topology, wanted)
        # A plan that cuts a path the job needs would stall the agents' TCP until the run is stopped.
        cut = cut_pairs(self._render(reconfig.normalise(wanted)).unreachable,
                        self.schedule_traffic)
        if cut:
            src, dst = cut[0]
            raise PlanError(f"this plan leaves no path from GPU {src} to GPU {dst}, which exchange data in this "
                            f"run (TCP needs both ways); keep a link or a relay between them")
        with self.lock:
            if reconfig.normalise(wanted) == self.state and self.requests.empty() and not self.busy:
                return None
            ident = self.next_id
            self.next_id += 1
        self.requests.put((wanted, source, ident, None))
        return ident

    def _reconfigure_loop(self) -> None:
        while True:
            wanted, source, ident, period_end = self.requests.get()
            self.busy = True
            try:
                self._reconfigure(wanted, source, ident, period_end)
            finally:
                self.busy = False

    def _reconfigure(self, wanted: dict, source: str, ident: int, period_end: float | None = None) -> None:
        """The hosts time the dark window: the timer process darkens their links at an agreed instant
        and restores them exactly the dark time later, so neither this process's threads nor the
        switches' confirmations can stretch it. Switch work happens around that window: rules for new
        links before it, deletions (and ports given a new peer, confirmed) inside it."""
        dark_s = us_to_s(self.settings["reconfig_us"]) * self.dilation
        with self.lock:
            change = reconfig.request(self.state, wanted, time.monotonic(), dark_s, ident, source)
            if change is None:
                # An earlier request already made this plan: say so, or a script waiting for this id
                # would wait in vain (the events file keeps reconfigurations only).
                self.reconfig_events.append({"kind": "unchanged", "id": ident, "source": source})
                return
        dark_rendering, new_rendering = self._render(change.dark), self._render(change.new)
        held = hold(self.topology, dark_rendering, new_rendering, self._rto_ms())
        batches = reconfig.steps(self.rendering, held, new_rendering)
        assert self.timer is not None
        self._barrier(self._send_rules(batches.ahead))
        repoint = any(batches.dark.add.values())
        darken = ("dark", batches.dark.host_lines, {"at_s": time.monotonic() + LEAD_S})
        restore_step = ("restore", batches.restore.host_lines, {"after_s": change.dark_s})
        self.timer.schedule(ident, darken, *(() if repoint else (restore_step,)))
        dark = self.timer.wait(ident, "dark", self.host_report_timeout_s)
        touched = self._send_rules(batches.dark)  # the hosts are off the darkened links by now
        with self.lock:
            self.state, self.rendering = change.dark, dark_rendering
        if repoint:
            # A packet that arrives before its rule leaves a cached drop in the datapath for tens of
            # milliseconds: the restore waits for the switches (and is late if they are).
            self._barrier(touched)
            self.timer.schedule(ident, restore_step)
        restore = self.timer.wait(ident, "restore", change.dark_s + self.host_report_timeout_s)
        self._send_rules(batches.after)  # nothing waits on these: no barrier
        measured = reconfig.darkness(dark["at_s"], restore["at_s"],
                                     {int(r): t for r, t in dark["done_s"].items()},
                                     {int(r): t for r, t in restore["done_s"].items()})
        with self.lock:
            self.state, self.rendering = change.new, new_rendering
            event = change.event(measured, self.dilation)
            event["unreachable"] = [list(p) for p in new_rendering.unreachable]
            # The end of the estimation period the plan came from: the oracle starts the dark there,
            # so dark_start_s - period_end_s is how late the controller's re-plan was.
            event["period_end_s"] = period_end
            # How late the hosts began the restore against the agreed instant (a CPU, or switches
            # slow to confirm a re-pointed port): what would make a dark time run long.
            event["restore_late_s"] = restore["begun_s"] - (restore["at_s"] - restore["early_s"])
            event["dark_late_s"] = dark["begun_s"] - (dark["at_s"] - dark["early_s"])
            # How long the hosts took to apply each phase (the spread of their links' switch-over),
            # and how early the timer began it to centre that spread on the agreed instant.
            event["restore_early_s"] = restore["early_s"]
            for phase, report in (("dark", dark), ("restore", restore)):
                # The host that took longest, to tell a stalled shell from a busy step.
                rank, done = max(report["done_s"].items(), key=lambda item: item[1], default=(None, report["begun_s"]))
                event[f"{phase}_applied_in_s"] = done - report["begun_s"]
                if rank is not None:
                    event[f"{phase}_slowest"] = [int(rank), done - report["begun_s"]]
            event["confirmed_s"] = time.monotonic()
            self.reconfig_events.append(event)
            with open(self.events_path, "a") as out:
                out.write(json.dumps(event) + "\n")

    def _rto_ms(self) -> int:
        return rto_min_ms(us_to_s(self.settings["reconfig_us"]) * self.dilation)

    def _render(self, state: dict) -> Rendering:
        return programming.render(self.topology, state, self._rto_ms())

    def _send_rules(self, ops: reconfig.Operations) -> set[int]:
        """Deletions, then additions; returns the switches touched (confirm with `_barrier`)."""
        touched: set[int] = set()
        for dpid, rules in ops.delete.items():
            for rule in rules:
                self._flow(self.datapaths[dpid], rule, add=False)
                touched.add(dpid)
        for dpid, rules in ops.add.items():
            for rule in rules:
                self._flow(self.datapaths[dpid], rule, add=True)
                touched.add(dpid)
        return touched

    # ---- northbound -----------------------------------------------------------------------------
    def snapshot(self) -> dict:
        with self.lock:
            kind = programming.link_state(self.topology)
            if kind == "circuits":
                links = [list(key) for key in sorted(self.state)]
            else:
                links = [[s, d, c] for (s, d), c in sorted(self.state.items())]
            return {"kind": kind, kind: links, "settings": dict(self.settings), "busy": self.busy,
                    "unreachable": [list(p) for p in self.rendering.unreachable]}

    def traffic(self) -> dict:
        with self.lock:
            return {"period_s": us_to_s(self.settings["estimate_period_us"]), "dilation": self.dilation,
                    "byte_scale": self.byte_scale, "last_period_bytes": self.last_period, "total_bytes": self.total}

    def update_settings(self, changes: dict) -> dict:
        unknown = sorted(set(changes) - set(self.settings))
        if unknown:
            raise PlanError(f"unknown setting '{unknown[0]}'; settings are {', '.join(sorted(self.settings))}")
        if "policy" in changes and changes["policy"] not in POLICIES:
            raise PlanError(f"policy must be one of {', '.join(POLICIES)}, not {changes['policy']!r}")
        for key in ("reconfig_us", "estimate_period_us", "retune_threshold_us"):
            if key in changes:
                value = changes[key]
                if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0 or \
                        (key == "estimate_period_us" and value <= 0):
                    sign = "positive" if key == "estimate_period_us" else "non-negative"
                    raise PlanError(f"{key} must be a {sign} number of microseconds, not {value!r}")
        with self.lock:
            self.settings.update(changes)
            return dict(self.settings)


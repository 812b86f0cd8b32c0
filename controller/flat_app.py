"""os-ken shim for Elect-Flat: installs the planned rules on each switch and reports readiness."""

from __future__ import annotations

import os
import time
from pathlib import Path

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3

from controller.shim import CONFIG_ENV, clear_tables, fail_loudly, featured_datapath
from testbed.fabrics.programming import switch_rules
from testbed.model.contracts import ControllerConfig, ControllerReady, Topology


class FlatFabricApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        config = ControllerConfig.loads(Path(os.environ[CONFIG_ENV]).read_text(), where=os.environ[CONFIG_ENV])
        topology = Topology.loads(Path(config.topology).read_text(), where=config.topology)
        self.ready_path = Path(config.ready)
        self.plan = switch_rules(topology)
        self.programmed: set[int] = set()

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev):
        try:
            datapath = featured_datapath(ev)
            parser = datapath.ofproto_parser
            ofproto = datapath.ofproto
            rules = self.plan.get(datapath.id)
            if rules is None:
                self.logger.warning("ignoring unknown switch %016x", datapath.id)
                return
            clear_tables(datapath)
            for rule in rules:
                actions = [parser.OFPActionOutput(rule.out_port)]
                instructions = [parser.OFPInstructionActions(ofproto.OFPIT_APPLY_ACTIONS, actions)]
                datapath.send_msg(parser.OFPFlowMod(datapath, priority=rule.priority,
                                                    match=parser.OFPMatch(**rule.match_dict()),
                                                    instructions=instructions))
            datapath.send_msg(parser.OFPBarrierRequest(datapath))
        except Exception:
            fail_loudly("programming a switch")

    # The switch answers the barrier sent with the features reply at once; os-ken may still have the
    # datapath in CONFIG_DISPATCHER then (another thread moves it to MAIN), and a reply dispatched
    # in that state reached no MAIN-only handler: the fabric was never reported programmed.
    @set_ev_cls(ofp_event.EventOFPBarrierReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def on_barrier(self, ev):
        try:
            self.programmed.add(ev.msg.datapath.id)
            if self.programmed >= set(self.plan):
                tmp = self.ready_path.with_suffix(".tmp")
                tmp.write_text(ControllerReady(switches=sorted(self.programmed), time=time.time()).dumps())
                tmp.replace(self.ready_path)
        except Exception:
            fail_loudly("recording readiness")

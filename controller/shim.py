"""What both os-ken apps share: where their configuration is, failing loudly, and starting a
(re)connected switch from empty tables."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

CONFIG_ENV = "TESTBED_CONTROLLER_CONFIG"  # the path of the controller's configuration file


def fail_loudly(where: str) -> None:
    """A failed handler leaves the fabric in an unknown state: stop the whole controller, whose
    exit the runner notices at once."""
    sys.stderr.write(f"controller: {where} failed:\n{traceback.format_exc()}")
    sys.stderr.flush()
    os._exit(3)


def guarded(where: str, func: Callable[..., None], *args: Any) -> None:
    """Run `func` (a thread's body) and fail loudly if it raises."""
    try:
        func(*args)
    except Exception:
        fail_loudly(where)


def featured_datapath(ev: Any) -> Any:
    """The datapath of a features reply, its id set. os-ken's own handler sets `datapath.id` from
    the same reply, but in its app's thread: under a slow CPU ours ran first and saw None (the
    switch was then ignored as unknown and the fabric never reported programmed)."""
    dp = ev.msg.datapath
    if dp.id is None:
        dp.id = ev.msg.datapath_id
    return dp


def clear_tables(dp: Any) -> None:
    """Delete every rule of every table, so a reconnecting switch never keeps stale ones."""
    parser, ofp = dp.ofproto_parser, dp.ofproto
    dp.send_msg(parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                                  out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY))

"""An OpenFlow 1.3 rule as data: what a kind's rule plan returns and the controller's shim sends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FlowRule:
    """One OpenFlow 1.3 rule: match fields (os-ken OFPMatch names) and an output port."""

    priority: int
    match: tuple[tuple[str, Any], ...]
    out_port: int
    table: int = 0

    def match_dict(self) -> dict[str, Any]:
        return dict(self.match)

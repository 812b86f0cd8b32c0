"""Every fabric kind's module, by the kind's name in the scenario (the names of testbed.model.fabric_kinds)."""

from __future__ import annotations

from testbed.fabrics.base import FabricBehaviour
from testbed.fabrics.elect_cluster import behaviour as elect_cluster
from testbed.fabrics.elect_fattree import behaviour as elect_fattree
from testbed.fabrics.elect_flat import behaviour as elect_flat
from testbed.fabrics.ina import behaviour as ina
from testbed.fabrics.ps import behaviour as ps
from testbed.fabrics.sip_ocs import behaviour as sip_ocs
from testbed.fabrics.sip_ring import behaviour as sip_ring
from testbed.model.fabric_kinds import KINDS

BEHAVIOURS: dict[str, FabricBehaviour] = {
    "elect-flat": elect_flat.BEHAVIOUR,
    "elect-cluster": elect_cluster.BEHAVIOUR,
    "elect-fattree": elect_fattree.BEHAVIOUR,
    "ps": ps.BEHAVIOUR,
    "sip-ocs": sip_ocs.BEHAVIOUR,
    "sip-ring": sip_ring.BEHAVIOUR,
    "ina": ina.BEHAVIOUR,
}
assert set(BEHAVIOURS) == set(KINDS), "every kind in testbed.model.fabric_kinds needs its module here"


def behaviour(kind: str) -> FabricBehaviour:
    found = BEHAVIOURS.get(kind)
    if found is None:
        raise ValueError(f"no fabric module for kind {kind}")
    return found

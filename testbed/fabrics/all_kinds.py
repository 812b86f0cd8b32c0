"""Every fabric kind's module, by the kind's name in the scenario (the names of testbed.core.fabric_kinds)."""

from __future__ import annotations

from testbed.core.fabric_kinds import KINDS
from testbed.fabrics import elect_cluster, elect_fattree, elect_flat, ina, ps, sip_ocs, sip_ring
from testbed.fabrics.base import FabricBehaviour

BEHAVIOURS: dict[str, FabricBehaviour] = {
    "elect-flat": elect_flat.BEHAVIOUR,
    "elect-cluster": elect_cluster.BEHAVIOUR,
    "elect-fattree": elect_fattree.BEHAVIOUR,
    "ps": ps.BEHAVIOUR,
    "sip-ocs": sip_ocs.BEHAVIOUR,
    "sip-ring": sip_ring.BEHAVIOUR,
    "ina": ina.BEHAVIOUR,
}
assert set(BEHAVIOURS) == set(KINDS), "every kind in testbed.core.fabric_kinds needs its module here"


def behaviour(kind: str) -> FabricBehaviour:
    found = BEHAVIOURS.get(kind)
    if found is None:
        raise ValueError(f"no fabric module for kind {kind}")
    return found

"""The registry of fabric kinds: each kind's folder gives its scenario section (with its KindSpec)
and its behaviour; every table of kinds is derived from this one list, so adding a kind is adding
its folder and its line here."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union, get_args

from pydantic import Field

from testbed.fabrics.base import FabricBehaviour
from testbed.fabrics.elect_cluster import behaviour as elect_cluster
from testbed.fabrics.elect_cluster.section import ElectClusterFabric
from testbed.fabrics.elect_fattree import behaviour as elect_fattree
from testbed.fabrics.elect_fattree.section import ElectFattreeFabric
from testbed.fabrics.elect_flat import behaviour as elect_flat
from testbed.fabrics.elect_flat.section import ElectFlatFabric
from testbed.fabrics.ina import behaviour as ina
from testbed.fabrics.ina.section import InaFabric
from testbed.fabrics.ps import behaviour as ps
from testbed.fabrics.ps.section import PsFabric
from testbed.fabrics.sip_ocs import behaviour as sip_ocs
from testbed.fabrics.sip_ocs.section import SipOcsFabric
from testbed.fabrics.sip_ring import behaviour as sip_ring
from testbed.fabrics.sip_ring.section import SipRingFabric
from testbed.model.fabric_section import FabricSection, KindSpec

# (section, behaviour) of every kind, in the order the docs list them
_REGISTERED: tuple[tuple[type[FabricSection], FabricBehaviour[Any]], ...] = (
    (ElectFlatFabric, elect_flat.BEHAVIOUR),
    (ElectClusterFabric, elect_cluster.BEHAVIOUR),
    (ElectFattreeFabric, elect_fattree.BEHAVIOUR),
    (PsFabric, ps.BEHAVIOUR),
    (SipOcsFabric, sip_ocs.BEHAVIOUR),
    (SipRingFabric, sip_ring.BEHAVIOUR),
    (InaFabric, ina.BEHAVIOUR),
)


def _kind_of(section: type[FabricSection]) -> str:
    (name,) = get_args(section.model_fields["kind"].annotation)
    return str(name)


SECTIONS: dict[str, type[FabricSection]] = {_kind_of(section): section for section, _ in _REGISTERED}
BEHAVIOURS: dict[str, FabricBehaviour[Any]] = {_kind_of(section): found for section, found in _REGISTERED}
KINDS: dict[str, KindSpec] = {name: section.spec for name, section in SECTIONS.items()}

AnyFabric = Annotated[Union[ElectFlatFabric, ElectClusterFabric, ElectFattreeFabric, PsFabric, SipOcsFabric,
                            SipRingFabric, InaFabric], Field(discriminator="kind")]
assert set(get_args(get_args(AnyFabric)[0])) == set(SECTIONS.values()), "AnyFabric must list every registered kind"

FabricKind = Literal["elect-flat", "elect-cluster", "elect-fattree", "ps", "sip-ocs", "sip-ring", "ina"]
assert set(get_args(FabricKind)) == set(SECTIONS), "FabricKind must name every registered kind"

EMULATED_FABRICS = tuple(name for name, spec in KINDS.items() if spec.emulated)
PARAMETER_SERVER_FABRICS = tuple(name for name, spec in KINDS.items() if spec.parameter_server)
ROUTED_FABRICS = tuple(name for name, spec in KINDS.items() if spec.routed)
CONTROLLER_APPS = {name: spec.controller_app for name, spec in KINDS.items() if spec.controller_app}


def behaviour(kind: str) -> FabricBehaviour[Any]:
    found = BEHAVIOURS.get(kind)
    if found is None:
        raise ValueError(f"no fabric module for kind {kind}")
    return found

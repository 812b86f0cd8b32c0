"""Elect-Fattree: a two-tier leaf-spine, leaf switches of `leaf_hosts` GPUs each wired to every one
of `spines` spines, uplinks B·leaf_hosts/oversubscription per leaf, flows hashed over the spines."""

from __future__ import annotations

import testbed.fabrics.leaf_spine as leaf_spine
from testbed.fabrics.base import TopologyBuilder
from testbed.fabrics.elect_fattree.section import ElectFattreeFabric
from testbed.model.topology import FattreeLayout, KindLayout


def tiers(fabric: ElectFattreeFabric) -> leaf_spine.TwoTier:
    return leaf_spine.TwoTier(fabric.leaf_hosts, fabric.leaf_hosts / fabric.oversubscription, fabric.spines)


def build(fabric: ElectFattreeFabric, builder: TopologyBuilder) -> dict[str, KindLayout]:
    uplink_bps = leaf_spine.build_two_tier(builder, fabric.hosts, tiers(fabric), ("spine", "leaf"))
    return {"fattree": FattreeLayout(leaf_hosts=fabric.leaf_hosts, leaves=fabric.hosts // fabric.leaf_hosts,
                                     spines=fabric.spines, oversubscription=fabric.oversubscription,
                                     uplink_rate_bps=uplink_bps)}


BEHAVIOUR = leaf_spine.behaviour(tiers, build, multipath=True)  # flows hashed over the spines (ECMP)

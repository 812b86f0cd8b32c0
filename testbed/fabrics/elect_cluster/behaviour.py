"""Elect-Cluster: servers of `gpus_per_server` GPUs on a fast server switch, each server with one
uplink of `server_uplink_gbps` to a core switch (a leaf-spine with one spine)."""

from __future__ import annotations

import math

import testbed.fabrics.leaf_spine as leaf_spine
from testbed.fabrics.base import TopologyBuilder
from testbed.fabrics.elect_cluster.section import ElectClusterFabric
from testbed.model.topology import ClusterLayout, KindLayout


def tiers(fabric: ElectClusterFabric) -> leaf_spine.TwoTier:
    return leaf_spine.TwoTier(fabric.gpus_per_server, fabric.server_uplink_gbps / fabric.gpu_bandwidth_gbps, 1)


def build(fabric: ElectClusterFabric, builder: TopologyBuilder) -> dict[str, KindLayout]:
    uplink_bps = leaf_spine.build_two_tier(builder, fabric.hosts, tiers(fabric), ("core", "server"))
    return {"cluster": ClusterLayout(gpus_per_server=fabric.gpus_per_server,
                                     servers=math.ceil(fabric.hosts / fabric.gpus_per_server),
                                     uplink_rate_bps=uplink_bps)}


BEHAVIOUR = leaf_spine.behaviour(tiers, build)

"""The oracle's DP ring and MP flows sharing a two-tier fabric's uplinks, against hand values."""

import pytest


def test_the_dp_ring_takes_its_share_of_the_uplinks_an_mp_group_crosses():
    from testbed.network.flow_model import FlowModel
    from testbed.oracle.fabrics import dp_load
    from testbed.oracle.iteration import beside_dp
    from testbed.planning.scenario_file import make_fabric

    cluster = make_fabric(kind="elect-cluster", hosts=32, gpus_per_server=8, server_uplink_gbps=400,
                          gpu_bandwidth_gbps=1000)
    # A 16-GPU MP group spans two servers; each server's 8 GPUs send 100 MB of DP ring each to
    # their counterparts in the other group and receive as much: 800 MB up and down per uplink.
    load = dp_load(cluster, 16, 2, 100e6)
    assert load == {("up", 0, 0): 800e6, ("down", 0, 0): 800e6, ("up", 1, 0): 800e6, ("down", 0, 1): 800e6}
    # An MP group inside one server shares no uplink with the DP ring.
    assert dp_load(cluster, 8, 4, 100e6) == {}
    # Over a 100 ms MP critical path that is 64 Gb/s of a 400 Gb/s uplink: MP keeps 336 Gb/s.
    model = FlowModel({("up", 0, 0): 400e9, ("out", 0): 1000e9})
    slowed = beside_dp(model, {("up", 0, 0): 800e6}, 0.1)
    assert slowed.capacity_bps == {("up", 0, 0): pytest.approx(336e9), ("out", 0): 1000e9}
    # A ring that would need more than the link over the path leaves MP half of it.
    assert beside_dp(model, {("up", 0, 0): 8e9}, 0.1).capacity_bps[("up", 0, 0)] == pytest.approx(200e9)

"""The userspace switch's drops at its ports' packet sockets, read from `ss -0 -m` as this kernel prints it."""

from testbed.emulation.switch_probes import packet_socket_drops

# As printed during an 8-GPU trace run (208 KB receive buffers): one socket per switch port, plus
# the datapath's unbound send socket; another bridge's port added, and one skmem moved onto a line
# of its own, as ss prints it when its output is not one line per socket.
SS_OUTPUT = """Netid State Recv-Q Send-Q Local Address:Port Peer Address:Port Process
p_raw 0      0                [0]:*                         *     skmem:(r0,rb212992,t0,tb4194304,f0,w0,o0,bl0,d0)
p_raw 0      0                  *:tb76fas1-eth7             *     skmem:(r0,rb212992,t0,tb4194304,f0,w0,o176,bl0,d280)
p_raw 0      0                  *:tb76fas1-eth2             *
\t skmem:(r0,rb212992,t0,tb4194304,f0,w0,o176,bl0,d357)
p_raw 0      0                  *:tb11aas1-eth1             *     skmem:(r0,rb212992,t0,tb4194304,f0,w0,o176,bl0,d9)
"""


def test_drops_are_summed_over_the_given_ports_only():
    assert packet_socket_drops(SS_OUTPUT, {"tb76fas1-eth7", "tb76fas1-eth2"}) == 280 + 357


def test_no_ports_no_drops():
    assert packet_socket_drops(SS_OUTPUT, set()) == 0
    assert packet_socket_drops("", {"tb76fas1-eth7"}) == 0

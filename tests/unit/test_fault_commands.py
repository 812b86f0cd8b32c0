"""The commands of a link fault where the kernel has netem (pure; the VM runs them for real)."""

from __future__ import annotations

from testbed.core.faults import FaultStep, leaf_classes, leaf_queues, netem_commands
from testbed.model.scenario import Fault

# `tc class show dev h1-eth0` after htb_commands_small_first(..., 100e6), as this machine prints it.
HTB_SMALL_FIRST = """\
class htb 1:5 parent 1:1 prio 0 rate 4558Kbit ceil 109116Kbit burst 13068b cburst 13053b
class htb 1:10 parent 1:1 prio 1 rate 104558Kbit ceil 104558Kbit burst 13043b cburst 13043b
class htb 1:1 root rate 109116Kbit ceil 109116Kbit burst 13053b cburst 13053b
"""


def test_leaf_classes_are_those_no_class_names_as_parent():
    assert leaf_classes(HTB_SMALL_FIRST) == ["1:5", "1:10"]
    assert leaf_classes("class htb 1:1 root rate 100Mbit ceil 100Mbit burst 1600b cburst 1600b\n") == ["1:1"]
    assert leaf_classes("") == []


def test_a_netem_leaf_under_htb_is_not_taken_for_a_shaping_class():
    with_netem = HTB_SMALL_FIRST + "class netem 8001:1 parent 8001:\n"
    assert leaf_classes(with_netem) == ["1:5", "1:10"]


def test_loss_goes_under_each_shaping_class_or_at_the_root_and_is_undone_there():
    fault = Fault(kind="link_loss", at_ms=30, host=1, loss_frac=0.05)
    start, end = FaultStep(0.0, fault, 0, False), FaultStep(0.0, fault, 0, True)
    assert netem_commands(start, "h2-eth0", ["1:5", "1:10"]) == [
        "tc qdisc replace dev h2-eth0 parent 1:5 netem loss 5.0000% limit 10000",
        "tc qdisc replace dev h2-eth0 parent 1:10 netem loss 5.0000% limit 10000"]
    assert netem_commands(start, "s1-eth2", None) == [
        "tc qdisc replace dev s1-eth2 root netem loss 5.0000% limit 10000"]
    assert netem_commands(end, "h2-eth0", ["1:5", "1:10"]) == ["tc qdisc del dev h2-eth0 parent 1:5",
                                                               "tc qdisc del dev h2-eth0 parent 1:10"]
    assert netem_commands(end, "s1-eth2", None) == ["tc qdisc del dev s1-eth2 root"]


def test_a_dead_link_loses_everything():
    fault = Fault(kind="link_down", at_ms=40, host=2, duration_ms=10)
    assert netem_commands(FaultStep(0.0, fault, 0, False), "h3-eth0", ["1:1"]) == [
        "tc qdisc replace dev h3-eth0 parent 1:1 netem loss 100% limit 10000"]


def test_clearing_a_fault_puts_each_leafs_own_queue_back():
    """`tc qdisc show` of a host side shaped with the lossless data queue: clearing netem restores
    the 20,000-frame FIFO under 1:10 (deleting it grafted HTB's default of 1,000 frames back)."""
    shown = ("qdisc htb 1: root refcnt 2 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000\n"
             "qdisc pfifo 10: parent 1:10 limit 20000p\n")
    queues = leaf_queues(shown)
    assert queues == {"1:10": "pfifo limit 20000"}
    fault = Fault(kind="link_loss", at_ms=30, host=1, loss_frac=0.05)
    end = FaultStep(0.0, fault, 0, True)
    assert netem_commands(end, "h2-eth0", ["1:5", "1:10"], queues) == [
        "tc qdisc del dev h2-eth0 parent 1:5", "tc qdisc replace dev h2-eth0 parent 1:10 pfifo limit 20000"]

"""The run watchdog: progress lines, the stall bound, the stall sentence (pure), and the agents'
side of it over loopback sockets: SIGUSR1 says what an agent waits on, SIGTERM keeps what it
completed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from testbed.core.watchdog import Progress, connect_timeout_s, describe_stall, stall_bound_s, start_up_bound_s
from testbed.planning.overrides import apply_overrides
from testbed.planning.scenario_file import load_scenario
from testbed.workloads.all_kinds import schedule_for

from ..conftest import ROOT


def test_progress_counts_rounds_every_rank_finished():
    text = "0 0 1.0\n1 0 1.0\n0 1 2.0\n1 1 2.0\n0 2 3.0\n1 2 3.0\n0 3 4.0\n1 "  # the last line is being written
    progress = Progress.parse(text, ranks=2)
    assert progress.rounds_done == (4, 3) and progress.lines == 7
    assert progress.iterations_done(warmups=2) == 1  # rank 1 finished rounds 0-2: warm-ups 0, 1 and iteration 0
    assert Progress.parse("", ranks=3).iterations_done(warmups=0) == 0


def test_loss_from_the_fabric_or_an_injected_fault_counts_as_loss():
    clean = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    assert not clean.loses_packets()
    assert load_scenario(ROOT / "scenarios" / "ina-lossy.yaml").loses_packets()
    fault = {"kind": "link_loss", "at_ms": 30, "host": 1, "loss_frac": 0.05}
    assert apply_overrides(clean, {"faults": [fault]}).loses_packets()


def test_stall_bound_is_three_rounds_never_under_ten_seconds_and_longer_for_the_first():
    assert stall_bound_s(2.0, first_round=False) == 10.0
    assert stall_bound_s(8.0, first_round=False) == 24.0
    assert stall_bound_s(8.0, first_round=True) == 54.0  # + 30 s for what the first round pays once
    assert stall_bound_s(8.0, first_round=False, lossy=True) == 60.0  # loss: the protocols' own timeouts first


def test_start_up_is_bounded_apart_and_stretches_with_the_machines_slowness():
    assert connect_timeout_s() == 30.0
    assert connect_timeout_s(0.5) == 30.0  # never below the reference machine's
    assert connect_timeout_s(33.9) == 1017.0  # the software-emulated VM: its 8 agents took 74 s to start
    assert start_up_bound_s(33.9) == 1027.0  # the agents' own timeout first: it names the silent peer


def test_stall_sentence_names_ranks_steps_peers_and_the_cutting_reconfiguration():
    reports = {
        0: {"rank": 0, "round": 3, "iteration": 1, "warmup": False, "step": "allreduce",
            "waits": [{"what": "receive", "peer": 3, "tag": 7, "for_s": 40.2}]},
        1: {"rank": 1, "round": 3, "iteration": 1, "warmup": False, "step": "allreduce",
            "waits": [{"what": "receive", "peer": 0, "tag": 7, "for_s": 12.0}]},
        2: None,
    }
    events = [{"id": 4, "source": "api", "unreachable": [[0, 1]]},
              {"id": 5, "source": "api", "unreachable": [[3, 0], [5, 6]]}]
    sentence = describe_stall(41.0, 30.0, reports, events, starting=[4])
    assert sentence == (
        "no rank finished a round for 41 s (the bound is 30 s): "
        "rank 0 waits in allreduce of iteration 1 to receive from rank 3 (40 s); "
        "rank 1 waits in allreduce of iteration 1 to receive from rank 0 (12 s); "
        "rank 4 never got past start-up; rank 2 did not say; "
        "reconfiguration 5 (from api) left no path from GPU 3 to GPU 0")


def test_stall_sentence_lists_six_waits_and_counts_the_rest():
    reports = {r: {"rank": r, "round": 0, "iteration": None, "warmup": True, "step": "the barrier before the round",
                   "waits": [{"what": "connection", "peer": (r + 1) % 9, "tag": None, "for_s": float(r)}]}
               for r in range(9)}
    sentence = describe_stall(12.0, 40.0, reports, [])
    assert sentence.count("waits in") == 6 and "3 more ranks wait too" in sentence
    assert sentence.index("rank 8 waits") < sentence.index("rank 7 waits")  # longest wait first
    assert "(warm-up round 0) to connect to rank 0" in sentence


def _agent_config(tmp_path, ranks: int, iterations: int) -> dict:
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "quickstart.yaml"),
                               {"fabric.hosts": ranks, "workload.iterations": iterations,
                                "workload.bytes": 2_000_000})
    schedule = tmp_path / "schedule.json"
    schedule.write_text(json.dumps(schedule_for(scenario).to_json()))
    hosts = tmp_path / "hosts"
    return {"rank_addresses": [f"127.0.3.{r + 1}" for r in range(ranks)], "port": 5201, "dilation": 1.0,
            "byte_scale": 1.0, "latency_s": 0.0, "seed": 1, "warmup_iterations": 1,
            "epoch_monotonic_s": time.monotonic(), "schedule": str(schedule), "out_dir": str(hosts),
            "progress": str(hosts / "progress"), "connect_timeout_s": 60.0}


def _start(tmp_path, config: dict, rank: int) -> subprocess.Popen:
    (tmp_path / "agent.json").write_text(json.dumps(config))
    return subprocess.Popen([sys.executable, "-m", "hosts.agent", "--config", str(tmp_path / "agent.json"),
                             "--rank", str(rank)], cwd=ROOT)


def _poll(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_agent_says_what_it_waits_on_and_a_stopped_agent_keeps_no_half_iteration(tmp_path):
    config = _agent_config(tmp_path, ranks=2, iterations=1)
    agent = _start(tmp_path, config, rank=0)  # rank 1 never starts: rank 0 waits to connect to it
    try:
        waiting = tmp_path / "hosts" / "h0.waiting.json"

        _poll((tmp_path / "hosts" / "h0.started").exists, 30, "the agent's start")

        def asked() -> bool:  # the agent may still be constructing itself: ask again
            agent.send_signal(signal.SIGUSR1)
            time.sleep(0.05)
            return waiting.exists() and "connecting" in waiting.read_text()

        _poll(asked, 30, "the waiting report")
        report = json.loads(waiting.read_text())
        assert report["rank"] == 0 and report["step"] == "connecting to its ring neighbour"
        assert [(w["what"], w["peer"]) for w in report["waits"]] == [("connection", 1)]
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=20) == 1
    finally:
        if agent.poll() is None:
            agent.kill()
    result = json.loads((tmp_path / "hosts" / "h0.result.json").read_text())
    assert result["stopped"] and not result["ok"] and result["iterations"] == []


def test_stopped_agents_keep_the_iterations_they_completed(tmp_path):
    stop_after = 2
    config = _agent_config(tmp_path, ranks=2, iterations=200)
    (tmp_path / "agent.json").write_text(json.dumps(config))
    agents = [_start(tmp_path, config, rank) for rank in range(2)]
    progress = tmp_path / "hosts" / "progress"
    try:
        # warm-up round 0, then measured rounds: wait until both ranks finished `stop_after` of them
        _poll(lambda: progress.exists() and Progress.parse(progress.read_text(), 2).iterations_done(1) >= stop_after,
              60, "measured iterations")
        for agent in agents:
            agent.send_signal(signal.SIGTERM)
        assert [agent.wait(timeout=20) for agent in agents] == [1, 1]
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
    for rank in range(2):
        result = json.loads((tmp_path / "hosts" / f"h{rank}.result.json").read_text())
        kept = [it["iteration"] for it in result["iterations"]]
        assert result["stopped"] and kept == list(range(len(kept))) and len(kept) >= stop_after
        events = [json.loads(line) for line in (tmp_path / "hosts" / f"h{rank}.events.jsonl").read_text().splitlines()]
        # every event belongs to a completed iteration, and each completed one has its events
        assert {e["iteration"] for e in events} == set(kept)
        assert sum(e["kind"] == "iteration" for e in events) == len(kept)


def test_faults_are_timed_from_the_clock_start_and_recorded_against_the_epoch():
    from testbed.core.faults import FaultInjector, timeline
    from testbed.model.scenario import Fault

    # 40 ms real-world at dilation 5 is 0.2 s of wall time after the clock starts, however late
    # that is after the epoch (agents that took 0.3 s to connect).
    fault = Fault(kind="link_down", at_ms=40, host=2, duration_ms=10)
    applied_at = []
    epoch = time.monotonic()
    injector = FaultInjector(timeline([fault], 5.0), epoch, 5.0, lambda step: applied_at.append(time.monotonic()))
    time.sleep(0.3)
    clock = time.monotonic()
    injector.start_at(clock)
    deadline = time.monotonic() + 5
    while len(applied_at) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    injector.stop()
    assert len(applied_at) == 2
    assert 0.2 <= applied_at[0] - clock < 0.45 and 0.25 <= applied_at[1] - clock < 0.5  # a busy machine adds
    start = injector.applied[0]
    assert start["phase"] == "start" and 0.1 <= start["t_s"] < 0.15  # (0.3 + 0.2) s / 5


def test_an_injector_never_started_stops_cleanly():
    from testbed.core.faults import FaultInjector

    FaultInjector([], time.monotonic(), 1.0, lambda step: None).stop()

"""A run that stopped early: results.json keeps the iterations every rank completed (with their
sums checked), says how many of how many, and a run that completed none is never called faithful
nor printed as an empty table."""

from __future__ import annotations

import json

from hosts import ops
from hosts.agent import data_seed
from hosts.data import digest
from hosts.timing import compute_timing
from testbed.emulation import results
from testbed.emulation.records import RunMeasurements, RunOutcome
from testbed.interface import cli
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
from testbed.planning.scenario_file import load_scenario

from ..conftest import ROOT


def _prepared(hosts: int = 2, iterations: int = 3):
    scenario = apply_overrides(load_scenario(ROOT / "scenarios" / "quickstart.yaml"),
                               {"fabric.hosts": hosts, "workload.iterations": iterations,
                                "workload.bytes": 1_000_000})
    return prepare(scenario)


def _iteration(prepared, rank: int, it: int, start_s: float) -> dict:
    """What an agent records for one ring all-reduce iteration, with the digest numpy expects."""
    n = prepared.schedule.hosts
    elements = ops.elements_for("allreduce", 1000, n)
    seed = data_seed(prepared.scenario.seed, list(range(n)))
    expected = digest(ops.expected("allreduce", seed, it, rank, n, elements))
    return {"iteration": it, "start_s": start_s, "end_s": start_s + 0.5, "start_overshoot_s": 0.0,
            "digests": [expected], "elements": [elements], "step_rates_bps": [],
            "checks": [{"op": "allreduce", "group_size": n, "pos": rank, "elements": elements, "digest": expected,
                        "seed": seed}]}


def _host(rank: int, iterations: list[dict], stopped: bool) -> dict:
    return {"rank": rank, "ok": not stopped, **({"stopped": True, "error": "stopped by the runner"} if stopped else {}),
            "iterations": iterations, "compute_timing": compute_timing([]),
            "latency": {"target_s": 0.0, "count": 0, "overshoot_mean_s": 0.0, "overshoot_p99_s": 0.0}}


def _write_hosts(run_dir, hosts: list[dict], events: dict[int, list[dict]]) -> None:
    (run_dir / "hosts").mkdir(parents=True)
    for host in hosts:
        rank = host["rank"]
        (run_dir / "hosts" / f"h{rank}.result.json").write_text(json.dumps(host))
        (run_dir / "hosts" / f"h{rank}.events.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in events.get(rank, [])))


def test_an_interrupted_run_keeps_the_iterations_every_rank_completed(tmp_path):
    prepared = _prepared()
    # Rank 0 finished iterations 0 and 1; rank 1 finished only 0 when both were stopped.
    hosts = [_host(0, [_iteration(prepared, 0, 0, 10.0), _iteration(prepared, 0, 1, 11.0)], stopped=True),
             _host(1, [_iteration(prepared, 1, 0, 10.0)], stopped=True)]
    event = {"t_s": 0.0, "duration_s": 0.001, "kind": "iteration"}
    _write_hosts(tmp_path, hosts, {0: [{**event, "host": 0, "iteration": 0}, {**event, "host": 0, "iteration": 1}],
                                   1: [{**event, "host": 1, "iteration": 0}]})
    result = results.assemble(prepared, tmp_path, RunMeasurements(epoch_monotonic_s=0.0),
                              RunOutcome("interrupted", "run interrupted by SIGINT (Ctrl-C)"))
    assert result["status"] == "interrupted"
    assert result["error"] == "run interrupted by SIGINT (Ctrl-C) after 1 of 3 iterations completed"
    assert result["iterations_completed"] == 1 and result["iterations_planned"] == 3
    assert result["sums_correct"] and len(result["iteration_times_s"]) == 1
    kept = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert {(e["host"], e["iteration"]) for e in kept} == {(0, 0), (1, 0)}  # not rank 0's iteration 1


def test_a_run_that_completed_no_iteration_says_so_and_is_not_called_faithful(tmp_path, capsys):
    prepared = _prepared()
    _write_hosts(tmp_path, [_host(0, [], stopped=True), _host(1, [], stopped=True)], {})
    result = results.assemble(prepared, tmp_path, RunMeasurements(), RunOutcome("failed", "no rank finished a round"))
    assert result["iterations_completed"] == 0 and not result["fidelity"]["ok"]
    assert result["fidelity"]["note"] == "no iteration completed"
    cli._summary(result, tmp_path)
    printed = capsys.readouterr().out
    assert "no iteration completed (no rank finished a round)" in printed
    assert "faithful" not in printed and "emulated/predicted" not in printed


def test_time_lost_to_retransmissions_per_iteration_is_in_the_breakdown():
    from testbed.emulation.results import _retransmission_per_iteration

    # INA: 4 workers waited 0.8 s of wall time in all on chunk timeouts over 2 iterations at
    # dilation 100: 0.8 / 4 / 2 / 100 = 1 ms of real-world time per host and iteration.
    ina = {"node": {}, "workers": {"retransmits": 12, "timeout_wait_s": 0.8}}
    assert abs(_retransmission_per_iteration(ina, [0, 0], 4, 2, 100.0, 0.2) - 1e-3) < 1e-15
    # TCP: 2 timeouts in the first of 2 measured iterations on 4 hosts, 200 ms each at least:
    # 2 × 0.2 / 4 / 2 / 100 = 0.5 ms.
    assert abs(_retransmission_per_iteration(None, [2, 0], 4, 2, 100.0, 0.2) - 0.5e-3) < 1e-15
    assert _retransmission_per_iteration(None, [], 4, 0, 100.0, 0.2) == 0.0
    # On a re-planned fabric's routes each timeout costs 2 s: 2 × 2 / 4 / 2 / 100 = 5 ms.
    assert abs(_retransmission_per_iteration(None, [2, 0], 4, 2, 100.0, 2.0) - 5e-3) < 1e-15

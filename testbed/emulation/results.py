"""Turns what the hosts measured into the run directory's results.json, events.jsonl and plots."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hosts import ops
from hosts.data import digest
from testbed.core import fidelity
from testbed.core.steal import steal_fractions
from testbed.fabrics.all_kinds import KINDS
from testbed.fabrics.ina.section import InaFabric
from testbed.model.contracts import Event, Results
from testbed.model.units import us_to_s

if TYPE_CHECKING:
    from testbed.emulation.prepare import Prepared


def switch_port_counters(bridges: list[str]) -> tuple[int, int] | None:
    """(packets received, packets dropped rx + tx) over the bridges' ports, from OpenFlow port stats."""
    received = dropped = 0
    for bridge in bridges:
        try:
            out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", bridge], capture_output=True,
                                 text=True, check=False, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode != 0:
            return None
        received += sum(int(n) for n in re.findall(r"rx pkts=(\d+)", out.stdout))
        dropped += sum(int(n) for n in re.findall(r"drop=(\d+)", out.stdout))
    return received, dropped


def counter_delta(before: tuple[int, int] | None, after: tuple[int, int] | None) -> dict | None:
    if before is None or after is None:
        return None
    return {"packets": after[0] - before[0], "dropped": after[1] - before[1]}


def _host_results(hosts_dir: Path, ranks: int) -> list[dict | None]:
    found = []
    for rank in range(ranks):
        path = hosts_dir / f"h{rank}.result.json"
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            found.append(None)
    return found


def controller_events(run_dir: Path, epoch_s: float | None, dilation: float) -> list[dict]:
    """The controller's reconfigurations, with times made real-world seconds since the agents' epoch."""
    path = run_dir / "controller_events.jsonl"
    if not path.exists() or epoch_s is None:
        return []
    found = []
    for line in path.read_text().splitlines():
        if line.strip():
            event = json.loads(line)
            for key in ("requested_s", "dark_start_s", "restored_s", "confirmed_s"):
                event[key] = (event[key] - epoch_s) / dilation
            event["t_s"] = event["requested_s"]
            found.append(event)
    return found


def _merge_events(hosts_dir: Path, run_dir: Path, extra: list[dict], iterations: int) -> list[dict]:
    """The controller's events and the hosts' for the iterations every rank completed."""
    events = list(extra)
    for path in sorted(hosts_dir.glob("h*.events.jsonl")):
        events.extend(event for event in (json.loads(line) for line in path.read_text().splitlines() if line.strip())
                      if event.get("iteration", -1) < iterations)
    events.sort(key=lambda e: (e["t_s"], e["host"]))
    with open(run_dir / "events.jsonl", "w") as out:
        for event in events:
            out.write(Event.model_validate(event).model_dump_json() + "\n")
    return events


STALL_JUDGED_ALGORITHMS = ("ring", "tree", "halving-doubling")


def _check_sums(prepared: "Prepared", per_host: list[dict]) -> tuple[bool, list[str]]:
    """Every collective's result on every host must equal what numpy computes from all inputs."""
    problems = []
    seed = prepared.scenario.seed
    expected: dict[tuple, str] = {}
    for host in per_host:
        for it, record in enumerate(host["iterations"]):
            for check in record.get("checks", []):
                op, size, pos, elements = check["op"], check["group_size"], check["pos"], check["elements"]
                data_seed = check.get("seed", seed)  # each group's own data (hosts.agent.data_seed)
                # All-reduce and broadcast results are the same on every rank: compute them once.
                key = (op, it, size, elements, data_seed) + (() if op in ("allreduce", "broadcast") else (pos,))
                if key not in expected:
                    expected[key] = digest(ops.expected(op, data_seed, it, pos, size, elements))
                if check["digest"] != expected[key]:
                    problems.append(f"host {host['rank']} iteration {it}: {op} result differs from numpy")
    return not problems, problems


def _ina_summary(node: dict | None, per_host: list[dict]) -> dict:
    """The node's counters (drops by reason, results, collisions) and the workers' (retransmissions,
    fallback aggregation), summed over workers; their timers' state (`timer_*`, wall seconds)
    averaged."""
    workers: dict[str, float] = {}
    reporting = [host["ina"] for host in per_host if host.get("ina")]
    for counters in reporting:
        for key, value in counters.items():
            share = 1 / len(reporting) if key.startswith("timer_") else 1
            workers[key] = workers.get(key, 0) + value * share
    return {"node": node, "workers": workers}


def collided_share(ina: dict) -> float:
    """The share of chunks the node sent to end hosts because their shared slot was held."""
    counters = (ina.get("node") or {}).get("counters", {})
    collided = counters.get("collisions", 0)
    return collided / max(1, collided + counters.get("results_multicast", 0))


def _retransmission_per_iteration(ina: dict | None, tcp_timeouts: list[int], ranks: int, iterations: int,
                                  dilation: float) -> float:
    """Real-world time a host waited on lost packets per iteration, on average: INA workers time
    their waits for a chunk's retransmission timeout (over every iteration, warm-ups included);
    over TCP, each retransmission timeout of a measured iteration costs at least RTO_MIN_S of wall
    time (a lower bound: TCP does not say how long it stalled)."""
    if ina is not None:
        waited_s = ina["workers"].get("timeout_wait_s", 0.0)
        return waited_s / ranks / iterations / dilation if ranks and iterations else 0.0
    if not tcp_timeouts or not ranks:
        return 0.0
    return sum(tcp_timeouts) * fidelity.RTO_MIN_S / ranks / len(tcp_timeouts) / dilation


def _why_longest_dark(reconfigurations: list[dict]) -> str:
    timed = [e for e in reconfigurations if e.get("configured_dark_s", 0) > 0]
    if not timed:
        return ""
    return fidelity.why_dark_ran_long(max(timed, key=lambda e: e["measured_dark_s"] / e["configured_dark_s"]))


def _dark_per_iteration(reconfigurations: list[dict], iterations: int) -> float:
    """Real-world dark time per iteration, from the reconfigurations after the agents started."""
    dark = sum(e["real_measured_dark_s"] for e in reconfigurations if e["requested_s"] >= 0)
    return dark / iterations if iterations else 0.0


def _per_job(prepared: "Prepared", per_host: list[dict], count: int) -> dict[str, dict[str, Any]]:
    """Each job's iterations: from the round's start on its hosts to its hosts' last step (jobs
    start each round together), against its own prediction beside the others."""
    dilation = prepared.plan.dilation
    by_rank = {h["rank"]: h for h in per_host}
    out: dict[str, dict[str, Any]] = {}
    for job, gpus in prepared.scenario.job_gpus():
        times = []
        for it in range(count):
            rows = [by_rank[g]["iterations"][it] for g in gpus if g in by_rank]
            if rows:
                times.append(dilation.real_time_s(max(r["end_s"] for r in rows) - min(r["start_s"] for r in rows)))
        predicted = prepared.job_predicted_s.get(job.name, 0.0)
        out[job.name] = {"gpus": gpus, "iteration_times_s": times, "predicted_iteration_time_s": predicted,
                         "emulated_over_predicted": [t / predicted for t in times] if predicted > 0 else []}
    return out


def assemble(prepared: "Prepared", run_dir: Path, measured: dict, outcome: dict) -> dict:
    scenario, plan, prediction = prepared.scenario, prepared.plan, prepared.prediction
    dilation = plan.dilation
    hosts_dir = run_dir / "hosts"
    ranks = prepared.schedule.hosts  # GPUs, and CPU machines where the fabric has them
    per_host_all = _host_results(hosts_dir, ranks)
    # A host that was stopped or failed still reports the iterations it completed.
    per_host = [h for h in per_host_all if h and "iterations" in h]
    errors = [f"rank {h['rank']}: {h['error']}" for h in per_host_all if h and not h.get("ok") and not h.get("stopped")]
    reconfigurations = controller_events(run_dir, measured.get("epoch_monotonic_s"), dilation.dilation)
    host_config_errors = [f"{p.name}: {line}" for p in sorted((run_dir / "host_config").glob("*.err"))
                          for line in p.read_text().splitlines() if line.strip() and not line.startswith("Warning")]

    iteration_times_s: list[float] = []
    iterations_wall_s = 0.0
    sums_ok = False
    sum_problems: list[str] = []
    complete = len(per_host) == ranks and all(h.get("ok") for h in per_host)
    # An iteration counts once every rank completed it; later ones some ranks finished are left out.
    count = min((len(h["iterations"]) for h in per_host), default=0) if len(per_host) == ranks else 0
    per_host = [{**h, "iterations": h["iterations"][:count]} for h in per_host]
    retransmits: list[int] = []  # TCP segments the hosts retransmitted, per iteration
    timeouts: list[int] = []  # and their retransmission timeouts
    windows: list[tuple[float, float]] = []  # each iteration's monotonic start and end
    for it in range(count):
        start = min(h["iterations"][it]["start_s"] for h in per_host)
        end = max(h["iterations"][it]["end_s"] for h in per_host)
        windows.append((start, end))
        iterations_wall_s += end - start
        iteration_times_s.append(dilation.real_time_s(end - start))
        retransmits.append(sum(h["iterations"][it].get("tcp_retransmits", 0) for h in per_host))
        timeouts.append(sum(h["iterations"][it].get("tcp_timeouts", 0) for h in per_host))
    if count:
        sums_ok, sum_problems = _check_sums(prepared, per_host)
    events = _merge_events(hosts_dir, run_dir, reconfigurations, count) if hosts_dir.is_dir() else []
    # Collectives whose steps are exchanges between ranks that start together after the barrier;
    # a schedule's steps also wait for peers' compute, and BytePS and INA chunks queue behind
    # the chunks before them by design.
    exchanges = scenario.workload.kind == "collective" and scenario.workload.algorithm in STALL_JUDGED_ALGORITHMS
    stalls = fidelity.stalls_per_iteration(events, dilation.dilation,
                                           [dilation.emulated_time_s(t) for t in iteration_times_s]) \
        if exchanges else None
    predicted = prediction.iteration_time_s
    ratios = [t / predicted for t in iteration_times_s]

    node_fabric = KINDS[scenario.fabric.kind].aggregation_node
    ina = _ina_summary(measured.get("ina_node"), per_host) if node_fabric else None
    loss_injected = scenario.fabric.loses_packets()
    calibration = prepared.calibration
    expected_bps = prepared.expected_rate_bps or plan.host_rate_bps
    if ina is not None and isinstance(scenario.fabric, InaFabric) and scenario.fabric.sharing == "shared":
        # Worker 0's link also carries every worker's colliding chunks: M·(1 + f·(n−1)) each way.
        workers = len(prepared.schedule.gpus[0].steps[0].collective().group)
        expected_bps /= 1 + collided_share(ina) * (workers - 1)
    rates = [r / expected_bps for h in per_host for it in h["iterations"] for r in it["step_rates_bps"]]
    if scenario.workload.kind in ("model", "trace", "chakra", "jobs"):
        # A schedule's steps include waiting for a peer's compute: time each message instead, against
        # what its path carries (a circuit or lightpath may be a share of B).
        fractions = prepared.pair_rate_frac or {}
        transfers = fidelity.transfer_rates_bps([e for e in events if e.get("iteration", -1) >= 0],
                                                dilation.dilation,
                                                us_to_s(scenario.fabric.latency_us) * dilation.dilation,
                                                plan.host_rate_bps)
        # A DAG's messages share their paths with whatever runs beside them: judged against the rate
        # the oracle's simulation gave each; else against what the pair's path carries alone.
        per_message = prepared.message_rate_frac
        if per_message is not None:
            transfers = [t for t in transfers if t[:3] in per_message]
        rates = [rate / (plan.host_rate_bps * (per_message[(src, dst, tag)] if per_message is not None
                                               else fractions.get((src, dst), 1.0)))
                 for src, dst, tag, rate in transfers]
    steal = steal_fractions(measured.get("cpu_samples") or [], windows)
    overshoot_mean = max((h["latency"]["overshoot_mean_s"] for h in per_host), default=0.0)
    overshoot_p99 = max((h["latency"]["overshoot_p99_s"] for h in per_host), default=0.0)
    step_emulated_s = dilation.emulated_time_s(prepared.shortest_event_s)
    smallest = round(dilation.byte_scale * prepared.smallest_message_bytes)
    timings = [h["compute_timing"] for h in per_host if h.get("compute_timing", {}).get("steps")]
    monitors = [
        fidelity.link_rate_monitor(rates, 1.0, loss_injected),
        fidelity.compute_timing_monitor(max((t["overshoot_s"] for t in timings), default=None), iterations_wall_s,
                                        max((t["overshoot_frac"] for t in timings), default=0.0),
                                        max((t["error_mean_frac"] for t in timings), default=None),
                                        max((t["error_p99_frac"] for t in timings), default=None)),
        fidelity.timer_monitor(overshoot_mean, overshoot_p99, step_emulated_s),
        fidelity.cpu_monitor(measured.get("cpu_busy_frac")),
        fidelity.steal_monitor(steal),
        fidelity.message_size_monitor(smallest, prepared.min_message_bytes),
        fidelity.capacity_monitor(plan.host_rate_bps * ranks, calibration.usable_capacity_bps,
                                  calibration.measured),
        fidelity.drop_monitor(measured.get("switch_packets")) if not node_fabric
        else fidelity.ina_loss_monitor(ina, loss_injected),
        fidelity.retransmission_monitor(timeouts, retransmits, [dilation.emulated_time_s(t) for t in iteration_times_s],
                                        loss_injected or bool(measured.get("faults"))),
        fidelity.stall_monitor(stalls, loss_injected or bool(measured.get("faults"))),
        fidelity.dark_time_monitor([e["measured_dark_s"] for e in reconfigurations],
                                   [e["configured_dark_s"] for e in reconfigurations],
                                   _why_longest_dark(reconfigurations)),
    ]
    verdict = fidelity.verdict(monitors)
    if not count:  # nothing was measured, so nothing can be called faithful
        verdict = {**verdict, "ok": False, "note": "no iteration completed"}

    status = outcome.get("status", "failed")
    planned = scenario.workload.iterations
    if status == "interrupted":
        outcome = {**outcome, "error": f"{outcome.get('error')} after {count} of {planned} iterations completed"}
    if status == "ok" and (not complete or errors):
        status = "failed"
        outcome = {**outcome, "error": errors[0] if errors else "some host agents wrote no result"}
    if status == "ok" and host_config_errors:
        status = "failed"
        outcome = {**outcome, "error": f"a host rejected the controller's configuration ({host_config_errors[0]})"}
    if status == "ok" and not sums_ok:
        status = "failed"
        outcome = {**outcome, "error": sum_problems[0]}
    faults = measured.get("faults") or []
    started = [f["fault"] for f in faults if f["phase"] == "start"]
    if status != "ok" and started:  # a failure after a fault names the fault
        outcome = {**outcome, "error": f"after fault {'; '.join(started)}: {outcome.get('error')}"}
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    comm = [e["duration_s"] for e in events if e["kind"] == "collective"]
    per_host_compute: dict[tuple[int, int], float] = {}
    for e in events:
        if e["kind"] == "compute":
            key = (e["host"], e["iteration"])
            per_host_compute[key] = per_host_compute.get(key, 0.0) + e["duration_s"]
    compute = list(per_host_compute.values())
    result = {
        "name": scenario.name,
        "status": status,
        "error": outcome.get("error"),
        "iterations_completed": count,
        "iterations_planned": planned,
        "iteration_times_s": iteration_times_s,
        "iteration_tcp_retransmits": retransmits,
        "iteration_tcp_timeouts": timeouts,
        "iteration_stalls": stalls if stalls is not None else [0] * count,
        "iteration_steal_frac": steal,
        "predicted_iteration_time_s": predicted,
        "emulated_over_predicted": ratios,
        "dilation": dilation.dilation,
        "byte_scale": dilation.byte_scale,
        "host_rate_bps": plan.host_rate_bps,
        "breakdown": {
            "compute_s": mean(compute) if compute else 0.0,
            "communication_s": mean(comm) if comm else None,
            "reconfiguration_s": _dark_per_iteration(reconfigurations, len(iteration_times_s)
                                                     + scenario.warmups()),
            "retransmission_s": _retransmission_per_iteration(ina, timeouts, ranks, count + scenario.warmups(),
                                                              dilation.dilation),
        },
        "reconfigurations": len(reconfigurations),
        "predicted_breakdown": prediction.breakdown.to_json(),
        "sums_correct": sums_ok,
        "sum_problems": sum_problems,
        "fidelity": verdict,
        "notes": list(plan.notes),
        "timings_s": measured.get("timings_s") or {},
    }
    if scenario.jobs:
        result["jobs"] = _per_job(prepared, per_host, count)
    if prepared.schedule.skipped_nodes:  # a Chakra trace's nodes that move no data, by type
        result["skipped_trace_nodes"] = dict(prepared.schedule.skipped_nodes)
    if ina is not None:
        result["ina"] = ina
    if faults:
        result["faults"] = faults
    (run_dir / "results.json").write_text(Results.model_validate(result).dumps() + "\n")
    if events:
        from testbed.emulation.plots import plot_run

        plot_run(run_dir, events, result)
    return result

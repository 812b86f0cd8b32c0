"""Turns what the hosts measured into the run directory's results.json, events.jsonl and plots."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hosts import ops
from hosts.data import digest
from testbed.core import fidelity
from testbed.core.fidelity import COUNTER_REFRESHES_PER_PERIOD, SETUP_COUNTER_REFRESH_MS
from testbed.core.steal import steal_fractions
from testbed.emulation.records import RunMeasurements, RunOutcome
from testbed.fabrics.all_kinds import KINDS, behaviour
from testbed.fabrics.ina.node_links import ina_workers_per_job
from testbed.fabrics.ina.section import InaFabric
from testbed.fabrics.timing import estimate_period_us
from testbed.model.contracts import Event, Results
from testbed.model.units import Dilation, us_to_s

if TYPE_CHECKING:
    from testbed.model.fabric_section import FabricSection
    from testbed.workloads.sizing import Prepared


def counter_refresh_notes(fabric: "FabricSection", dilation: float, refresh_ms: int | None) -> list[str]:
    """A note where the switch refreshes its flow counters fewer than COUNTER_REFRESHES_PER_PERIOD
    times in an estimation period's wall time: a controller that re-plans from them then sees
    bytes in the wrong period, and re-plans and retunes where the prediction does not."""
    if refresh_ms is None or not behaviour(fabric.kind).replans(fabric):
        return []
    period_ms = estimate_period_us(fabric) * dilation / 1e3
    if refresh_ms * COUNTER_REFRESHES_PER_PERIOD <= period_ms * (1 + 1e-9):
        return []
    return [f"Open vSwitch refreshes the flow counters the controller estimates traffic from every {refresh_ms} ms, "
            f"fewer than {COUNTER_REFRESHES_PER_PERIOD} times an estimation period here ({period_ms:.0f} ms of "
            f"wall time): the controller re-plans on traffic counted in the wrong period; scripts/setup.sh sets "
            f"other_config:max-idle to {SETUP_COUNTER_REFRESH_MS} ms, and a dilation of at least "
            f"{refresh_ms * COUNTER_REFRESHES_PER_PERIOD * 1e3 / estimate_period_us(fabric):.0f} gives the "
            f"counters time"]


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
            for key in ("requested_s", "dark_start_s", "restored_s", "confirmed_s", "period_end_s"):
                if event.get(key) is not None:
                    event[key] = (event[key] - epoch_s) / dilation
            event["t_s"] = event["requested_s"]
            found.append(event)
    return found


def _merge_events(hosts_dir: Path, run_dir: Path, extra: list[dict], counted: dict[int, int]) -> list[dict]:
    """The controller's events and the hosts' for the iterations counted on each host (`counted`:
    by rank, those every rank of its job completed)."""
    events = list(extra)
    for path in sorted(hosts_dir.glob("h*.events.jsonl")):
        events.extend(event for event in (json.loads(line) for line in path.read_text().splitlines() if line.strip())
                      if event.get("iteration", -1) < counted.get(event.get("host", -1), 0))
    events.sort(key=lambda e: (e["t_s"], e["host"]))
    with open(run_dir / "events.jsonl", "w") as out:
        for event in events:
            out.write(Event.model_validate(event).model_dump_json() + "\n")
    return events


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
                                  dilation: float, rto_min_s: float) -> float:
    """Real-world time a host waited on lost packets per iteration, on average: INA workers time
    their waits for a chunk's retransmission timeout (over every iteration, warm-ups included);
    over TCP, each retransmission timeout of a measured iteration costs at least the routes'
    `rto_min_s` of wall time (a lower bound: TCP does not say how long it stalled)."""
    if ina is not None:
        waited_s = ina["workers"].get("timeout_wait_s", 0.0)
        return waited_s / ranks / iterations / dilation if ranks and iterations else 0.0
    if not tcp_timeouts or not ranks:
        return 0.0
    return sum(tcp_timeouts) * rto_min_s / ranks / len(tcp_timeouts) / dilation


def _why_longest_dark(reconfigurations: list[dict]) -> str:
    timed = [e for e in reconfigurations if e.get("configured_dark_s", 0) > 0]
    if not timed:
        return ""
    return fidelity.why_dark_ran_long(max(timed, key=lambda e: e["measured_dark_s"] / e["configured_dark_s"]))


def _dark_per_iteration(reconfigurations: list[dict], iterations: int) -> float:
    """Real-world dark time per iteration, from the reconfigurations after the agents started."""
    dark = sum(e["real_measured_dark_s"] for e in reconfigurations if e["requested_s"] >= 0)
    return dark / iterations if iterations else 0.0


def _per_job(prepared: "Prepared", runs: dict[str, "MeasuredIterations"], events: list[dict[str, Any]],
             reconfigurations: list[dict[str, Any]], ina: dict[str, Any] | None,
             epoch_s: float | None) -> dict[str, dict[str, Any]]:
    """Each job's iterations (its own rounds: jobs keep their own pace), against its prediction
    beside the others, with its breakdown from its hosts' events."""
    out: dict[str, dict[str, Any]] = {}
    for job, gpus in prepared.scenario.job_gpus():
        run = runs[job.name]
        predicted = prepared.job_predicted_s.get(job.name, 0.0)
        mine = [e for e in events if e.get("host") in set(gpus)]
        out[job.name] = {"gpus": gpus, "iteration_times_s": run.times_s, "predicted_iteration_time_s": predicted,
                         "emulated_over_predicted": [t / predicted for t in run.times_s] if predicted > 0 else [],
                         "iteration_tcp_retransmits": run.tcp_retransmits, "iteration_tcp_timeouts": run.tcp_timeouts,
                         "breakdown": _measured_breakdown(prepared, mine, _within(reconfigurations, run, epoch_s,
                                                                                   prepared.plan.dilation),
                                                          ina, run, warmups=0)}
    return out


def _within(reconfigurations: list[dict[str, Any]], run: "MeasuredIterations", epoch_s: float | None,
            dilation: Dilation) -> list[dict[str, Any]]:
    """The reconfigurations requested during one job's measured iterations (the others' loading
    rounds go on around them)."""
    if epoch_s is None:
        return []
    spans = [((start - epoch_s) / dilation.dilation, (end - epoch_s) / dilation.dilation) for start, end in run.windows]
    return [e for e in reconfigurations if any(a <= e["requested_s"] < b for a, b in spans)]


@dataclass(frozen=True)
class MeasuredIterations:
    """The iterations every rank completed: real-world times, wall-clock windows and TCP counters."""

    times_s: list[float]
    windows: list[tuple[float, float]]  # each iteration's monotonic start and end
    tcp_retransmits: list[int]  # TCP segments the hosts retransmitted, per iteration
    tcp_timeouts: list[int]  # and their retransmission timeouts

    @property
    def count(self) -> int:
        return len(self.times_s)

    @property
    def wall_s(self) -> float:
        return sum(end - start for start, end in self.windows)

    @classmethod
    def joined(cls, runs: list["MeasuredIterations"]) -> "MeasuredIterations":
        """Several jobs' iterations in one list, for the monitors that judge every iteration."""
        return cls([t for r in runs for t in r.times_s], [w for r in runs for w in r.windows],
                   [n for r in runs for n in r.tcp_retransmits], [n for r in runs for n in r.tcp_timeouts])


def measured_iterations(per_host: list[dict[str, Any]], dilation: Dilation) -> MeasuredIterations:
    """An iteration lasts from its first rank's start to its last rank's end."""
    count = min((len(h["iterations"]) for h in per_host), default=0)
    windows = [(min(h["iterations"][it]["start_s"] for h in per_host),
                max(h["iterations"][it]["end_s"] for h in per_host)) for it in range(count)]
    return MeasuredIterations(
        times_s=[dilation.real_time_s(end - start) for start, end in windows],
        windows=windows,
        tcp_retransmits=[sum(h["iterations"][it].get("tcp_retransmits", 0) for h in per_host) for it in range(count)],
        tcp_timeouts=[sum(h["iterations"][it].get("tcp_timeouts", 0) for h in per_host) for it in range(count)])


def _job_iterations(prepared: "Prepared", per_host: list[dict[str, Any]]) -> tuple[dict[str, MeasuredIterations],
                                                                                   dict[int, int]]:
    """Each job's measured iterations (one job, named "", where the scenario has no jobs) and how
    many of each host's iterations count: those every rank of its job completed."""
    dilation = prepared.plan.dilation
    if not prepared.scenario.jobs:
        run = measured_iterations(per_host, dilation)
        return {"": run}, {h["rank"]: run.count for h in per_host}
    by_rank = {h["rank"]: h for h in per_host}
    runs, counted = {}, {}
    for job, gpus in prepared.scenario.job_gpus():
        runs[job.name] = measured_iterations([by_rank[g] for g in gpus if g in by_rank], dilation)
        counted.update({g: runs[job.name].count for g in gpus})
    return runs, counted


def _link_rates(prepared: "Prepared", per_host: list[dict[str, Any]], events: list[dict[str, Any]],
                ina: dict[str, Any] | None) -> list[float]:
    """Every step's or message's rate over what its path should carry (1.0: as emulated)."""
    scenario, plan = prepared.scenario, prepared.plan
    expected_bps = prepared.expected_rate_bps or plan.host_rate_bps
    if ina is not None and isinstance(scenario.fabric, InaFabric) and scenario.fabric.sharing == "shared":
        # Worker 0's link also carries every worker's colliding chunks: M·(1 + f·(n−1)) each way.
        workers = ina_workers_per_job(prepared.schedule, scenario.fabric)
        expected_bps /= 1 + collided_share(ina) * (workers - 1)
    if prepared.communication_from_collectives:  # a collective: its steps are the exchanges
        if not prepared.step_rates_judged:
            return []
        return [r / expected_bps for h in per_host for it in h["iterations"] for r in it["step_rates_bps"]]
    # A schedule's steps include waiting for a peer's compute: time each message instead, against
    # what its path carries (a circuit or lightpath may be a share of B).
    fractions = prepared.pair_rate_frac or {}
    transfers = fidelity.transfer_rates_bps([e for e in events if e.get("iteration", -1) >= 0],
                                            plan.dilation.dilation,
                                            us_to_s(scenario.fabric.latency_us) * plan.dilation.dilation,
                                            plan.host_rate_bps)
    # A DAG's messages share their paths with whatever runs beside them: judged against the rate
    # the oracle's simulation gave each; else against what the pair's path carries alone.
    per_message = prepared.message_rate_frac
    if per_message is not None:
        transfers = [t for t in transfers if t[:3] in per_message]
    return [rate / (plan.host_rate_bps * (per_message[(src, dst, tag)] if per_message is not None
                                          else fractions.get((src, dst), 1.0)))
            for src, dst, tag, rate in transfers]


def _monitors(prepared: "Prepared", measured: RunMeasurements, per_host: list[dict[str, Any]],
              iterations: MeasuredIterations, steal: list[float | None], stalls: list[int] | None,
              rates: list[float], ina: dict[str, Any] | None, reconfigurations: list[dict[str, Any]]) -> list[Any]:
    scenario, plan = prepared.scenario, prepared.plan
    dilation = plan.dilation
    loss_injected = scenario.fabric.loses_packets()
    faulted = loss_injected or bool(measured.faults)
    timings = [h["compute_timing"] for h in per_host if h.get("compute_timing", {}).get("steps")]
    emulated_times_s = [dilation.emulated_time_s(t) for t in iterations.times_s]
    return [
        fidelity.link_rate_monitor(rates, 1.0, loss_injected),
        fidelity.compute_timing_monitor(max((t["overshoot_s"] for t in timings), default=None), iterations.wall_s,
                                        max((t["overshoot_frac"] for t in timings), default=0.0),
                                        max((t["error_mean_frac"] for t in timings), default=None),
                                        max((t["error_p99_frac"] for t in timings), default=None)),
        fidelity.timer_monitor(max((h["latency"]["overshoot_mean_s"] for h in per_host), default=0.0),
                               max((h["latency"]["overshoot_p99_s"] for h in per_host), default=0.0),
                               dilation.emulated_time_s(prepared.shortest_event_s)),
        fidelity.cpu_monitor(measured.cpu_busy_frac),
        fidelity.steal_monitor(steal),
        fidelity.message_size_monitor(round(dilation.byte_scale * prepared.smallest_message_bytes),
                                      prepared.min_message_bytes),
        fidelity.capacity_monitor(plan.host_rate_bps * prepared.schedule.hosts,
                                  prepared.calibration.usable_capacity_bps, prepared.calibration.measured),
        fidelity.drop_monitor(measured.switch_packets.to_json() if measured.switch_packets else None)
        if ina is None else fidelity.ina_loss_monitor(ina, loss_injected),
        fidelity.retransmission_monitor(iterations.tcp_timeouts, iterations.tcp_retransmits, emulated_times_s,
                                        faulted, prepared.route_rto_min_s()),
        fidelity.stall_monitor(stalls, faulted),
        fidelity.dark_time_monitor([e["measured_dark_s"] for e in reconfigurations],
                                   [e["configured_dark_s"] for e in reconfigurations],
                                   _why_longest_dark(reconfigurations)),
    ]


def _final_outcome(outcome: RunOutcome, count: int, planned: int, problems: list[str],
                   faults: list[dict[str, Any]]) -> RunOutcome:
    """The runner's outcome, failed by the first problem the results found (a host's error, a host
    that rejected its configuration, a wrong sum); a failure after a fault names the fault."""
    if outcome.status == "interrupted":
        outcome = outcome.explained(f"{outcome.error} after {count} of {planned} iterations completed")
    if outcome.status == "ok" and problems:
        outcome = outcome.failed(problems[0])
    started = [f["fault"] for f in faults if f["phase"] == "start"]
    if outcome.status != "ok" and started:
        outcome = outcome.explained(f"after fault {'; '.join(started)}: {outcome.error}")
    return outcome


def _measured_breakdown(prepared: "Prepared", events: list[dict[str, Any]], reconfigurations: list[dict[str, Any]],
                        ina: dict[str, Any] | None, iterations: MeasuredIterations,
                        warmups: int | None = None) -> dict[str, float | None]:
    """Compute, communication, dark time and retransmission waits per iteration; dark time over the
    run's rounds (warm-ups too, `warmups` unless given) that `reconfigurations` were requested in."""
    scenario, dilation = prepared.scenario, prepared.plan.dilation
    comm = [e["duration_s"] for e in events if e["kind"] == "collective"]
    per_host_compute: dict[tuple[int, int], float] = {}
    for e in events:
        if e["kind"] == "compute":
            key = (e["host"], e["iteration"])
            per_host_compute[key] = per_host_compute.get(key, 0.0) + e["duration_s"]
    compute = list(per_host_compute.values())
    run_iterations = iterations.count + (scenario.warmups() if warmups is None else warmups)
    compute_s = sum(compute) / len(compute) if compute else 0.0
    dark_s = _dark_per_iteration(reconfigurations, run_iterations)
    if not prepared.communication_from_collectives and iterations.count:
        # A schedule's steps interleave sends, receives and waits: as the prediction counts it,
        # communication is what of the iteration neither compute nor dark time takes.
        communication_s: float | None = max(0.0, sum(iterations.times_s) / iterations.count - compute_s - dark_s)
    else:
        communication_s = sum(comm) / len(comm) if comm else None
    return {
        "compute_s": compute_s,
        "communication_s": communication_s,
        "reconfiguration_s": dark_s,
        "retransmission_s": _retransmission_per_iteration(ina, iterations.tcp_timeouts, prepared.schedule.hosts,
                                                          run_iterations, dilation.dilation,
                                                          prepared.route_rto_min_s()),
    }


def assemble(prepared: "Prepared", run_dir: Path, measured: RunMeasurements, outcome: RunOutcome) -> dict[str, Any]:
    """results.json (and events.jsonl, the plots) from the hosts' files and what the runner measured."""
    scenario, plan, prediction = prepared.scenario, prepared.plan, prepared.prediction
    dilation = plan.dilation
    hosts_dir = run_dir / "hosts"
    ranks = prepared.schedule.hosts  # GPUs, and CPU machines where the fabric has them
    per_host_all = _host_results(hosts_dir, ranks)
    # A host that was stopped or failed still reports the iterations it completed.
    per_host = [h for h in per_host_all if h and "iterations" in h]
    complete = len(per_host) == ranks and all(h.get("ok") for h in per_host)
    problems = [f"rank {h['rank']}: {h['error']}" for h in per_host_all
                if h and not h.get("ok") and not h.get("stopped")]
    if not complete and not problems:
        problems.append("some host agents wrote no result")
    problems += [f"a host rejected the controller's configuration ({p.name}: {line})"
                 for p in sorted((run_dir / "host_config").glob("*.err"))
                 for line in p.read_text().splitlines() if line.strip() and not line.startswith("Warning")]
    reconfigurations = controller_events(run_dir, measured.epoch_monotonic_s, dilation.dilation)

    # An iteration counts once every rank (of its job) completed it; later ones are left out.
    if len(per_host) != ranks:
        per_host = [{**h, "iterations": []} for h in per_host]
    runs, counted = _job_iterations(prepared, per_host)
    # Top-level figures are the first job's (the only one's); monitors judge every job's iterations.
    iterations = next(iter(runs.values()))
    judged = MeasuredIterations.joined(list(runs.values()))
    count = iterations.count
    per_host = [{**h, "iterations": h["iterations"][:counted.get(h["rank"], 0)]} for h in per_host]
    every_job = min(run.count for run in runs.values())
    sums_ok, sum_problems = _check_sums(prepared, per_host) if every_job else (False, ["no iteration completed"])
    problems += sum_problems
    events = _merge_events(hosts_dir, run_dir, reconfigurations, counted) if hosts_dir.is_dir() else []
    # Collectives whose steps are exchanges between ranks that start together after the barrier;
    # a schedule's steps also wait for peers' compute, and BytePS and INA chunks queue behind
    # the chunks before them by design.
    exchanges = prepared.stalls_judged
    stalls = fidelity.stalls_per_iteration(events, dilation.dilation,
                                           [dilation.emulated_time_s(t) for t in iterations.times_s]) \
        if exchanges else None
    predicted = prediction.iteration_time_s
    ina = _ina_summary(measured.ina_node, per_host) if KINDS[scenario.fabric.kind].aggregation_node else None
    steal_judged = steal_fractions(measured.cpu_samples, judged.windows)
    steal = steal_judged[:count]
    verdict = fidelity.verdict(_monitors(prepared, measured, per_host, judged, steal_judged, stalls,
                                         _link_rates(prepared, per_host, events, ina), ina, reconfigurations))
    if not every_job:  # nothing was measured, so nothing can be called faithful
        verdict = {**verdict, "ok": False, "note": "no iteration completed"}
    planned = scenario.jobs[0].workload.iterations if scenario.jobs else scenario.workload.iterations
    final = _final_outcome(outcome, count, planned, problems, measured.faults)
    jobs = _per_job(prepared, runs, events, reconfigurations, ina, measured.epoch_monotonic_s) \
        if scenario.jobs else {}
    # Only a controller that re-plans reads the switches' counters: ask Open vSwitch for no one else.
    refresh_ms = measured.counter_refresh_ms
    result: dict[str, Any] = {
        "name": scenario.name,
        "status": final.status,
        "error": final.error,
        "iterations_completed": count,
        "iterations_planned": planned,
        "iteration_times_s": iterations.times_s,
        "iteration_tcp_retransmits": iterations.tcp_retransmits,
        "iteration_tcp_timeouts": iterations.tcp_timeouts,
        "iteration_stalls": stalls if stalls is not None else [0] * count,
        "iteration_steal_frac": steal,
        "predicted_iteration_time_s": predicted,
        "emulated_over_predicted": [t / predicted for t in iterations.times_s],
        "dilation": dilation.dilation,
        "byte_scale": dilation.byte_scale,
        "host_rate_bps": plan.host_rate_bps,
        "breakdown": next(iter(jobs.values()))["breakdown"] if jobs else
        _measured_breakdown(prepared, events, reconfigurations, ina, iterations),
        "reconfigurations": len(reconfigurations),
        "predicted_breakdown": prediction.breakdown.to_json(),
        "sums_correct": sums_ok,
        "sum_problems": sum_problems if count else [],
        "fidelity": verdict,
        "notes": list(plan.notes) + counter_refresh_notes(scenario.fabric, dilation.dilation, refresh_ms),
        "timings_s": measured.timings_s,
    }
    if jobs:
        result["jobs"] = jobs
    if prepared.predicted_range_s is not None:
        result["predicted_range_s"] = list(prepared.predicted_range_s)
    if prepared.schedule.skipped_nodes:  # a Chakra trace's nodes that move no data, by type
        result["skipped_trace_nodes"] = dict(prepared.schedule.skipped_nodes)
    if ina is not None:
        result["ina"] = ina
    if measured.faults:
        result["faults"] = measured.faults
    (run_dir / "results.json").write_text(Results.model_validate(result).dumps() + "\n")
    if events:
        from testbed.emulation.plots import plot_run

        plot_run(run_dir, events, result)
    return result

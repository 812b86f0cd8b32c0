"""The `testbed` command: doctor, check, place, search, predict, run, sweep, sweep-merge, report, clean."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from testbed.model.errors import EnvironmentProblem, InputError, TestbedError

# Piped or captured, lines keep their length (rich would wrap them at 80 columns) and tables get
# room; on a terminal rich follows its width.
PIPED_WIDTH = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 200
console = Console(soft_wrap=True, width=PIPED_WIDTH)
err_console = Console(stderr=True, soft_wrap=True, width=PIPED_WIDTH)


def cmd_doctor(args: argparse.Namespace) -> int:
    from testbed.core.calibration import load_calibration, store_calibration
    from testbed.core.fidelity import STEAL_TOLERANCE
    from testbed.core.paths import calibration_path
    from testbed.emulation.platform import inspect_platform

    if args.calibrate:
        from testbed.emulation.calibrate import calibrate

        said = err_console if args.json else console  # --json keeps standard output to the JSON alone
        with said.status("calibrating: forwarding capacity, timer precision and the INA node's packet rate ..."):
            measured = calibrate()
        path = store_calibration(measured)
        said.print(f"calibration stored in {path}")
    report = inspect_platform()
    calibration = load_calibration()
    if args.json:
        print(json.dumps({**report.to_json(), "calibration": calibration.to_json()}, indent=1))
        return 0
    table = Table(title="What this machine can emulate", show_header=False)
    yes = lambda flag: "[green]yes[/]" if flag else "[red]no[/]"  # noqa: E731
    table.add_row("root", yes(report.root))
    version = f" ({report.ovs_version})" if report.ovs_version else ""
    table.add_row("Open vSwitch running", yes(report.ovs_running) + version)
    table.add_row("datapath", "kernel" if report.datapath == "kernel" else "userspace (netdev; no kernel module)")
    table.add_row("netem (kernel delay/loss)", yes(report.netem))
    table.add_row("Mininet + mnexec", yes(report.mininet))
    table.add_row("cores", str(report.cores))
    if calibration.measured:
        agents = (f" (the agents' ring {calibration.agent_capacity_bps / 1e6:.0f}, "
                  f"{(calibration.agent_step_s or 0) * 1e3:.1f} ms a step)" if calibration.agent_capacity_bps else "")
        table.add_row("calibration", f"capacity {calibration.capacity_bps / 1e6:.0f} Mb/s{agents}, timer p99 error "
                      f"{calibration.timer_error_s * 1e6:.0f} µs, INA node "
                      f"{calibration.node_packets_per_s:,.0f} packets/s ({calibration.measured_at}, "
                      f"{calibration_path()})")
        if calibration.steal_frac is not None:
            busy = calibration.steal_frac > STEAL_TOLERANCE
            table.add_row("hypervisor's steal while calibrating",
                          f"{'[yellow]' if busy else ''}{calibration.steal_frac:.1%}{'[/]' if busy else ''}"
                          + (": the host was busy with others, so capacity may read low; calibrate again when it "
                             "is quieter" if busy else ""))
    else:
        table.add_row("calibration",
                      "[yellow]none[/]: run `testbed doctor --calibrate`; auto uses conservative defaults")
    console.print(table)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from testbed.planning.plan import check_scenario
    from testbed.planning.scenario_file import load_scenario

    try:
        scenario = load_scenario(args.scenario)
        # What the fields allow but no schedule can run (placement, profiles, traces) fails here.
        with _naming(args.scenario), _prediction_progress(quiet=args.json):
            report = check_scenario(scenario)
    except TestbedError as error:
        if not args.json:
            raise
        print(json.dumps({"scenario": str(args.scenario), "ok": False, "error": str(error)}, indent=1))
        return error.exit_code
    f, w = scenario.fabric, scenario.workload
    if args.json:
        print(json.dumps({"scenario": str(args.scenario), "ok": True, "name": scenario.name, "fabric": f.kind,
                          "hosts": f.hosts, "workload": w.kind, "warnings": list(report.warnings),
                          "skipped_trace_nodes": dict(report.skipped_nodes)}, indent=1))
        return 0
    what = w.describe()
    console.print(f"{args.scenario}: ok: {scenario.name}, {f.kind} with {f.hosts} hosts at "
                  f"{f.gpu_bandwidth_gbps:g} Gb/s, {what}, {w.iterations} iterations")
    if report.skipped_nodes:
        console.print("trace nodes skipped (no data moved, no time taken): "
                      + ", ".join(f"{n} {kind}" for kind, n in report.skipped_nodes))
    _warn(report.warnings)
    return 0


@contextlib.contextmanager
def _naming(path: str) -> Iterator[None]:
    """A refusal of what the scenario at `path` asks names the file, as `check` and `predict` both say it."""
    try:
        yield
    except InputError as error:
        text = str(error)
        raise InputError(text if text.startswith(str(path)) else f"{path}: {text}") from None


def _directory(path: str | Path, flag: str = "--out") -> Path:
    """A directory the command writes into, made where missing; InputError where it cannot be."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise InputError(f"{flag} {out}: a file is there, not a directory; give a directory to write into")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"{flag} {out}: cannot make this directory ({error.strerror}); give one you can "
                         f"write into") from None
    return out


def _plot_file(path: str) -> Path:
    """Where a plot goes: a file (PNG unless its name says another format) in a directory that exists."""
    out = Path(path)
    if out.is_dir():
        raise InputError(f"--plot {out}: a directory; give a file, e.g. {out / 'compare.png'}")
    out = out if out.suffix else out.with_suffix(".png")
    if not out.parent.is_dir():
        raise InputError(f"--plot {out}: no directory {out.parent}; give a file in a directory that exists")
    return out


def _warn(warnings: Iterable[str]) -> None:
    for warning in warnings:
        err_console.print(f"[yellow]warning[/]: {escape(warning)}", highlight=False)


PLAIN_PROGRESS_AFTER_S, PLAIN_PROGRESS_EVERY_S = 10.0, 30.0


@contextlib.contextmanager
def _prediction_progress(quiet: bool) -> Iterator[None]:
    """A bar on a terminal's stderr while a prediction simulates (what, how far, time left), gone
    when it ends; where stderr is a file or pipe, a line every half minute once it has taken ten
    seconds (a log then says why the command is still going); nothing under --json."""
    from testbed.core import progress

    if quiet:
        yield
        return
    if not err_console.is_terminal:
        started = time.monotonic()
        said = [started + PLAIN_PROGRESS_AFTER_S - PLAIN_PROGRESS_EVERY_S]

        def line(what: str, done: float) -> None:
            now = time.monotonic()
            if now - said[0] >= PLAIN_PROGRESS_EVERY_S:
                said[0] = now
                err_console.print(f"predicting: {escape(what)}: {done:.0%} done after {now - started:.0f} s",
                                  highlight=False)
        with progress.reporting(line):
            yield
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), TextColumn("left"),
                   TimeRemainingColumn(), console=err_console, transient=True)
    task = bar.add_task("predicting", total=1.0)
    with bar, progress.reporting(lambda what, done: bar.update(task, description=what, completed=done)):
        yield


def cmd_predict(args: argparse.Namespace) -> int:
    from testbed.planning.plan import plan, plan_schedule
    from testbed.planning.scenario_file import load_scenario

    scenario = load_scenario(args.scenario)
    _warn(scenario.fabric.field_warnings())
    # --schedule: that schedule.json on the scenario's fabric, predicted as a trace workload is
    with _naming(args.scenario), _prediction_progress(quiet=args.json):
        found = plan_schedule(scenario, args.schedule) if args.schedule else plan(scenario)
    prediction, jobs = found.prediction, found.jobs
    if args.plans:
        _write_plans(found, Path(args.plans))
    if args.json:
        out: dict[str, Any] = {**prediction.to_json(), "method": found.method}
        if found.traffic_bytes is not None:
            out["traffic_bytes"] = found.traffic_bytes.to_json()
        if found.gpu_memory is not None:
            out["gpu_memory"] = found.gpu_memory.to_json()
        if jobs:
            out["jobs"] = {j.name: {"gpus": list(j.gpus), "predicted_iteration_time_s": j.together_s,
                                    "alone_iteration_time_s": j.alone_s} for j in jobs}
        print(json.dumps(out, indent=1))
        return 0
    if jobs:
        table = Table(title=f"{scenario.name}: {len(jobs)} jobs on one {scenario.fabric.kind} fabric")
        for column in ("job", "GPUs", "together (ms)", "alone (ms)", "together/alone"):
            table.add_column(column, justify="right")
        for j in jobs:
            table.add_row(j.name, _host_ranges(j.gpus), f"{j.together_s * 1e3:.3f}", f"{j.alone_s * 1e3:.3f}",
                          f"{j.together_s / j.alone_s:.3f}" if j.alone_s > 0 else "n/a")
        console.print(table)
    console.print(f"{scenario.name}: predicted iteration time {prediction.iteration_time_s * 1e3:.3f} ms "
                  f"({found.method})")
    console.print(f"  {prediction.breakdown.describe()}")
    console.print(f"  how: {prediction.formula}")
    if found.traffic_bytes is not None:
        shares = ", ".join(f"{name} {value / 1e9:.3f} GB" for name, value in found.traffic_bytes.by_parallelism.items()
                           if value)
        console.print(f"  on the wire per iteration: {found.traffic_bytes.total() / 1e9:.3f} GB ({shares})")
    if found.gpu_memory is not None:
        memory = found.gpu_memory
        console.print(f"  memory per GPU (stage {memory.stage}): {memory.total() / 1e9:.1f} of "
                      f"{memory.device / 1e9:g} GB")
    return 0


def _write_plans(found: Any, out: Path) -> None:
    """predict --plans DIR: the fabric's plans over one iteration as the prediction's simulation
    meets them (the retune rule it chose, the controller's delay 0), as plans.json and plans.png."""
    from testbed.oracle.plan_record import draw_plans, plans_json
    from testbed.oracle.schedule_sim import simulate_counting_retunes

    if not found.schedule.gpus:
        raise InputError(f"{found.scenario.name}: predicted without a whole schedule to follow (in closed form, "
                         f"or one replica simulated for all beyond what a run emulates); --plans needs a scenario "
                         f"small enough to simulate whole")
    if out.exists() and not out.is_dir():
        raise InputError(f"--plans {out}: is a file; give a directory (it is created if missing)")
    simulated = simulate_counting_retunes(found.schedule, found.scenario.fabric)
    record = plans_json(simulated.plans, found.schedule.hosts)
    out.mkdir(parents=True, exist_ok=True)
    (out / "plans.json").write_text(json.dumps(record, indent=1) + "\n")
    draw_plans(record, f"{found.scenario.name} on {found.scenario.fabric.kind}: {len(record['plans'])} plan(s), "
                       f"{simulated.retunes} retune(s)", str(out / "plans.png"))
    err_console.print(f"wrote {out / 'plans.json'} and {out / 'plans.png'} ({len(record['plans'])} plan(s))")


def _host_ranges(hosts: tuple[int, ...]) -> str:
    """0-3, 8, 10-11: a job's hosts in short."""
    parts: list[str] = []
    for h in sorted(hosts):
        if parts and parts[-1].split("-")[-1] == str(h - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{h}"
        else:
            parts.append(str(h))
    return ", ".join(parts)


def cmd_place(args: argparse.Namespace) -> int:
    from testbed.placer.plan import verify
    from testbed.planning.scenario_file import load_scenario
    from testbed.workloads.all_kinds import schedule_for
    from testbed.workloads.model.plan import model_plan
    from testbed.workloads.model.section import ModelWorkload

    scenario = load_scenario(args.scenario)
    if not isinstance(scenario.workload, ModelWorkload):
        raise InputError(f"{args.scenario}: testbed place needs workload.kind model (got {scenario.workload.kind})")
    with err_console.status("placing ...") if not args.json else contextlib.nullcontext():
        plan = model_plan(scenario)
        schedule = schedule_for(scenario)  # the schedule a run replays (buckets fused as the fabric needs)
    problems = verify(plan)
    if problems:
        raise TestbedError(f"the placement failed its own verification: {problems[0]}")
    out = _directory(args.out)
    (out / "schedule.json").write_text(json.dumps(schedule.to_json()) + "\n")
    with open(out / "traffic_matrix.csv", "w") as matrix:
        for row in schedule.traffic_matrix_bytes:
            matrix.write(",".join(str(v) for v in row) + "\n")
    placement = plan.placement
    gpus: list[dict[str, Any]] = []
    for g in range(plan.k):
        mine = [(i, c) for i, op in enumerate(placement.ops) for c in range(op.parts) if placement.gpu[i][c] == g]
        gpus.append({"gpu": g, "compute_s": sum(placement.ops[i].part_us for i, _ in mine) / 1e6,
                     "sub_ops": len(mine), "sends_to": sorted({d for (s, d) in plan.mp_traffic if s == g}),
                     "receives_from": sorted({s for (s, d) in plan.mp_traffic if d == g}),
                     "dp_peer": plan.dp_peer(g) if plan.l > 1 else None, "memory_bytes": plan.memory_bytes[g],
                     "dp_grad_bytes": plan.grad_bytes[g]})
    used = max(len(entry["sends_to"]) for entry in gpus) + (1 if plan.l > 1 else 0)
    if args.json:
        print(json.dumps({"model": plan.model, "mp": plan.k, "dp": plan.l, "global_batch": plan.global_batch,
                          "degree_limit": plan.degree, "degree_used": used, "gpus": gpus,
                          "schedule": str(out / "schedule.json"),
                          "traffic_matrix": str(out / "traffic_matrix.csv")}, indent=1))
        return 0
    table = Table(title=f"{scenario.name}: {plan.model}, mp={plan.k}, dp={plan.l}, batch {plan.global_batch}, "
                        f"degree {plan.degree if plan.degree is not None else 'unlimited'}")
    for column in ("GPU", "compute (ms)", "sub-ops", "sends to", "receives from", "memory (GB)", "DP grads (MB)"):
        table.add_column(column, justify="right")
    for entry in gpus:
        dp = f" +DP {entry['dp_peer']}" if entry["dp_peer"] is not None else ""
        table.add_row(str(entry["gpu"]), f"{entry['compute_s'] * 1e3:.2f}", str(entry["sub_ops"]),
                      (",".join(map(str, entry["sends_to"])) or "-") + dp,
                      ",".join(map(str, entry["receives_from"])) or "-",
                      f"{entry['memory_bytes'] / 1e9:.2f}", f"{entry['dp_grad_bytes'] / 1e6:.1f}")
    console.print(table)
    console.print(f"degree used: {used} (limit {plan.degree if plan.degree is not None else 'none'}); "
                  f"MP groups replicate GPUs 0..{plan.k - 1}; wrote {out / 'schedule.json'} and "
                  f"{out / 'traffic_matrix.csv'}")
    return 0


def cmd_export_chakra(args: argparse.Namespace) -> int:
    from testbed.planning.scenario_file import load_scenario
    from testbed.workloads.all_kinds import schedule_for
    from testbed.workloads.chakra.export import comm_group_file, export_chakra

    scenario = load_scenario(args.scenario)
    try:
        schedule = schedule_for(scenario)
        files = export_chakra(schedule)
    except InputError as error:
        raise InputError(f"{args.scenario}: {error}") from None
    out = _directory(args.out)
    stale = [p.name for p in out.glob("*.et") if not p.name.startswith(f"{scenario.name}.")]
    if stale:
        raise InputError(f"{out} already holds another trace ({stale[0]}); give an empty directory")
    for rank, data in enumerate(files):
        (out / f"{scenario.name}.{rank}.et").write_bytes(data)
    (out / "comm_group.json").write_text(comm_group_file(schedule) + "\n")
    console.print(f"wrote {len(files)} Chakra files, {sum(map(len, files)):,} bytes: "
                  f"{out / scenario.name}.{{0..{len(files) - 1}}}.et, and the process groups as "
                  f"{out / 'comm_group.json'} (ASTRA-sim's --comm-group-configuration)")
    return 0


def _search_splits(args: argparse.Namespace, scenario: Any) -> int:
    """`search` on a large model: its fastest (tp, pp, dp, micro-batch) that fits in memory."""
    from rich.progress import Progress

    from testbed.workloads.llm.search import search_splits

    gpus = args.gpus or scenario.fabric.hosts
    with Progress(console=err_console, transient=True, disable=args.json) as progress:
        task = progress.add_task(f"searching (tp, pp, dp, micro-batch) on {gpus} GPUs", total=None)
        splits, too_big = search_splits(scenario, args.gpus, args.top, lambda: progress.advance(task))
    if args.json:
        print(json.dumps({"gpus": gpus, "fabric": scenario.fabric.kind, "did_not_fit": too_big, "candidates": [
            {"tp": s.tp, "pp": s.pp, "dp": s.dp, "micro_batch": s.micro_batch, "iteration_time_s": s.iteration_s,
             "bubble_s": s.bubble_s, "memory_bytes": s.memory_bytes, "method": s.method} for s in splits]}, indent=1))
        return 0
    table = Table(title=f"{scenario.workload.model.name()} on {gpus} GPUs of {scenario.fabric.kind}: the "
                        f"{len(splits)} fastest splits that fit ({too_big} did not)")
    for column in ("rank", "tp", "pp", "dp", "micro-batch", "iteration (ms)", "bubble (ms)", "memory (GB)"):
        table.add_column(column, justify="right")
    for rank, s in enumerate(splits, start=1):
        table.add_row(str(rank), str(s.tp), str(s.pp), str(s.dp), str(s.micro_batch), f"{s.iteration_s * 1e3:.3f}",
                      f"{s.bubble_s * 1e3:.3f}", f"{s.memory_bytes / 1e9:.1f}")
    console.print(table)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from testbed.planning.scenario_file import load_scenario
    from testbed.workloads.llm.section import LlmWorkload
    from testbed.workloads.model.search import ranked, search_space

    scenario = load_scenario(args.scenario)
    if args.top < 1:
        raise InputError(f"--top {args.top}: give how many candidates to list, 1 or more")
    if isinstance(scenario.workload, LlmWorkload):
        return _search_splits(args, scenario)
    try:
        space = search_space(scenario, args.gpus)
    except InputError as error:
        raise InputError(f"{args.scenario}: {error}") from None
    model, gpus, fabric = space.model, space.gpus, space.fabric
    with Progress(console=err_console, transient=True, disable=args.json) as progress:
        task = progress.add_task(f"searching (k, l, batch) for {model.name} on {gpus} GPUs", total=space.steps)
        choices = ranked(space.cache, gpus, fabric, ks=space.ks, on_step=lambda: progress.advance(task),
                         top=args.top)
    if args.json:
        print(json.dumps({"model": model.name, "gpus": gpus, "fabric": fabric.kind, "candidates": [
            {"mp": c.k, "dp": c.l, "global_batch": c.global_batch, "iteration_time_s": c.iteration_s,
             "iterations": c.iterations, "time_to_accuracy_s": c.time_to_accuracy_s, "breakdown": c.breakdown}
            for c in choices]}, indent=1))
        return 0
    best = choices[0]
    console.print(f"{model.name} on {gpus} GPUs of {fabric.kind} at {fabric.gpu_bandwidth_gbps:g} Gb/s: best "
                  f"mp={best.k}, dp={best.l}, global batch {best.global_batch}: iteration "
                  f"{best.iteration_s * 1e3:.3f} ms × {best.iterations:.0f} iterations = time to accuracy "
                  f"{best.time_to_accuracy_s / 60:.1f} min")
    if len(choices) > 1:
        table = Table(title=f"the {len(choices)} best candidates")
        for column in ("rank", "mp", "dp", "batch", "iteration (ms)", "compute (ms)", "communication (ms)",
                       "dark (ms)", "time to accuracy (min)"):
            table.add_column(column, justify="right")
        for rank, c in enumerate(choices, start=1):
            part = c.breakdown
            table.add_row(str(rank), str(c.k), str(c.l), str(c.global_batch), f"{c.iteration_s * 1e3:.3f}",
                          f"{part.get('compute_s', 0) * 1e3:.3f}", f"{part.get('communication_s', 0) * 1e3:.3f}",
                          f"{part.get('reconfiguration_s', 0) * 1e3:.3f}", f"{c.time_to_accuracy_s / 60:.1f}")
        console.print(table)
    return 0


def _summary(result: dict, run_dir: Path) -> None:
    completed, planned = result["iterations_completed"], result["iterations_planned"]
    if not completed:  # nothing measured: no table, no verdict
        console.print(f"{result['name']}: {result['status']}; no iteration completed "
                      f"({result.get('error') or 'see the run directory'})")
        console.print(f"run directory: {run_dir}")
        return
    of = "" if completed == planned else f" ({completed} of {planned} iterations completed)"
    table = Table(title=f"{result['name']}: {result['status']}{of}")
    table.add_column("iteration", justify="right")
    table.add_column("emulated (ms)", justify="right")
    table.add_column("predicted (ms)", justify="right")
    table.add_column("emulated/predicted", justify="right")
    predicted_ms = result["predicted_iteration_time_s"] * 1e3
    for i, (t, ratio) in enumerate(zip(result["iteration_times_s"], result["emulated_over_predicted"])):
        table.add_row(str(i), f"{t * 1e3:.3f}", f"{predicted_ms:.3f}", f"{ratio:.3f}")
    console.print(table)
    if result.get("predicted_range_s"):
        from testbed.oracle.retune_threshold import LAG_PERIODS
        low, high = result["predicted_range_s"]
        console.print(f"predicted: the mean of {low * 1e3:.3f}-{high * 1e3:.3f} ms, the outcomes of a controller "
                      f"that retunes 0-{LAG_PERIODS[-1]:.0%} of a period after each period ends")
    fidelity = result["fidelity"]
    verdict = "[green]faithful[/]" if fidelity["ok"] else "[red]NOT faithful[/]"
    sums = "[green]correct[/]" if result["sums_correct"] else "[red]WRONG[/]"
    console.print(f"sums {sums}; fidelity {verdict}; dilation {result['dilation']:.4g}, "
                  f"byte scale {result['byte_scale']:.4g}, {result['host_rate_bps'] / 1e6:.1f} Mb/s per host")
    for name, monitor in fidelity["monitors"].items():
        if not monitor["ok"]:
            err_console.print(f"[yellow]warning[/]: {name}: {monitor['detail']}; {monitor['fix']}")
    for note in result.get("notes", []):
        err_console.print(f"[yellow]note[/]: {note}")
    console.print(f"run directory: {run_dir}")


class _HoldMessages:
    """What a held run says as it goes: starting, each iteration done, then held."""

    def __init__(self, name: str, run_dir: Path, total: int) -> None:
        self.name, self.run_dir, self.total, self.done = name, run_dir, total, 0

    def started(self) -> None:
        console.print(f"{self.name}: fabric up, iterations running (0 of {self.total} done); controller scripts "
                      f"reach it through {self.run_dir}/controller.ready", highlight=False)

    def progress(self, done: int, total: int) -> None:
        if done > self.done:
            self.done = done
            console.print(f"{self.name}: iteration {done} of {total} done", highlight=False)

    def held(self) -> None:
        console.print(f"{self.name}: all {self.total} iterations done; the fabric is held until Ctrl-C",
                      highlight=False)


def cmd_run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from testbed.emulation.run import Runner, default_run_dir
    from testbed.planning.plan import prepare
    from testbed.planning.scenario_file import load_scenario

    scenario = load_scenario(args.scenario)
    _warn(scenario.fabric.field_warnings())
    prepared = prepare(scenario)
    # Started in the background, a process may inherit SIGINT ignored; a run must stay interruptible.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    run_dir = Path(args.out) if args.out else default_run_dir(scenario)
    if args.cli:
        result = Runner(prepared, run_dir, interactive=True, capture_packets=args.capture).execute()
    elif args.hold:
        console.print(f"{scenario.name}: starting the fabric; it stays up after the "
                      f"{scenario.workload.iterations} iterations until Ctrl-C", highlight=False)
        say = _HoldMessages(scenario.name, run_dir, scenario.workload.iterations)
        result = Runner(prepared, run_dir, hold=True, on_started=say.started, on_progress=say.progress,
                        on_hold=say.held, capture_packets=args.capture).execute()
    else:
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                      TimeElapsedColumn(), console=console, transient=True) as progress:
            task = progress.add_task(f"{scenario.name}: iterations", total=scenario.workload.iterations)
            runner = Runner(prepared, run_dir, on_progress=lambda done, total: progress.update(task, completed=done),
                            capture_packets=args.capture)
            result = runner.execute()
    _summary(result, run_dir)
    if result["status"] != "ok":
        err_console.print(f"[red]error[/]: {result['error']}")
        return 1
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from testbed.emulation.platform import is_root
    from testbed.emulation.registry import clean_orphans

    if not is_root():
        raise EnvironmentProblem("testbed clean needs root to remove bridges and processes; use sudo")
    removed = clean_orphans()
    console.print(f"removed leftovers of {removed['runs']} dead run(s): {removed['bridges']} bridge(s), "
                  f"{removed['links']} link(s), {removed['processes']} process(es)")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from testbed.interface.sweep import csv_name, in_shard, parse_sets, parse_shard, plan_points, predict_point
    from testbed.planning.scenario_file import load_scenario

    scenario = load_scenario(args.scenario)
    sets = parse_sets(args.set)
    shard = parse_shard(args.shard) if args.shard else None
    planned = plan_points(scenario, sets)
    # a point's fabric may contradict itself (a swept B beside fixed wavelengths): say so, per point
    _warn(f"sweep point {point.id}: {warning}" for point, point_scenario in planned
          for warning in point_scenario.fabric.field_warnings())
    prepared = {}  # on this machine, each point runs as prepared here (on Ray, each worker prepares its own)
    if not args.predict_only:
        from testbed.planning.plan import prepare

        for point, point_scenario in planned:  # every point must be runnable before any runs
            try:
                prepared[point.id] = prepare(point_scenario)
            except InputError as error:
                raise InputError(f"sweep point {point.id}: {error}") from None
    signal.signal(signal.SIGINT, signal.default_int_handler)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    sweep_dir = _directory(args.out) if args.out else Path("sweeps") / f"{scenario.name}-{stamp}"
    total = sum(in_shard(point, shard) for point, _ in planned)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task(f"{scenario.name}: sweep points", total=total)
        seen = [0]

        def on_point(point, status):
            seen[0] += 1
            progress.update(task, completed=seen[0])
            progress.console.print(f"{point.id}: {status}", highlight=False)

        try:
            if args.ray:
                counts = _sweep_on_ray(args, scenario, sets, sweep_dir, shard, on_point)
            else:
                from testbed.emulation.run import Runner
                from testbed.interface.sweep import run_sweep

                def emulate(point_scenario, run_dir: Path) -> dict:
                    return Runner(prepared[run_dir.name], run_dir).execute()

                execute = predict_point if args.predict_only else emulate
                counts = run_sweep(args.scenario, scenario, sets, sweep_dir, execute, on_point, shard)
        except KeyboardInterrupt:  # between two points: nothing half-done
            counts = {"ran": 0, "skipped": 0, "failed": 0, "interrupted": True}
    console.print(f"sweep directory: {sweep_dir} ({counts['ran']} run, {counts['skipped']} already done, "
                  f"{counts['failed']} failed); table in {sweep_dir / csv_name(shard)}")
    for point_id in counts.get("lost", []):
        err_console.print(f"[red]lost[/]: {point_id}: its machine went away; rerun the same command to run it again")
    if counts.get("stranded"):
        err_console.print(f"[red]stopped[/]: for a minute no machine of the Ray cluster offered what "
                          f"{len(counts['stranded'])} waiting point(s) need (the `testbed` resource, or a CPU)")
    if counts["interrupted"]:
        err_console.print(f"[red]interrupted[/]: rerun the same command with --out {sweep_dir} to resume")
        return 1
    return 1 if counts["failed"] else 0


def _sweep_on_ray(args: argparse.Namespace, scenario, sets, sweep_dir: Path, shard, on_point) -> dict:
    from testbed.emulation.platform import is_root
    from testbed.interface.ray_sweep import connect, run_on_ray
    from testbed.interface.sweep import open_sweep

    ray = connect(args.ray, can_emulate=is_root() and not args.predict_only)
    try:
        sweep = open_sweep(args.scenario, scenario, sets, sweep_dir, shard, lambda p: on_point(p, "done before"))
        return run_on_ray(ray, sweep, args.predict_only, on_point)
    finally:
        ray.shutdown()


def cmd_sweep_merge(args: argparse.Namespace) -> int:
    from testbed.interface.sweep import merge_sweeps

    out = _directory(args.out)
    merged = merge_sweeps(out, [Path(d) for d in args.directories])
    console.print(f"{out}: {merged['points']} points, {merged['copied']} run directories copied in; "
                  f"table in {out / 'results.csv'}")
    if merged["missing"]:
        shown = ", ".join(merged["missing"][:10]) + (" ..." if len(merged["missing"]) > 10 else "")
        err_console.print(f"[red]missing[/]: {len(merged['missing'])} point(s) finished in no shard: {shown}")
        return 1
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from testbed.interface.report import report

    directory = Path(args.directory)
    if not directory.is_dir():
        raise InputError(f"{directory} is not a directory; give a run directory or a sweep directory")
    path = report(directory, _directory(args.out) if args.out else None)
    console.print(f"report: {path} (figures beside it)")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from testbed.interface import compare as comparing
    from testbed.interface.sweep import parse_sets
    from testbed.planning.overrides import apply_overrides
    from testbed.planning.scenario_file import load_scenario

    plot_file = _plot_file(args.plot) if args.plot else None  # before the work, not after it
    overrides = {}
    for key, values in (parse_sets(args.set) if args.set else {}).items():
        if len(values) != 1:
            raise InputError(f"--set {key}: compare sets one value in every scenario (use testbed sweep for several)")
        overrides[key] = values[0]
    scenarios = []
    for path in args.scenarios:
        scenario = load_scenario(path)
        scenarios.append((str(path), apply_overrides(scenario, overrides) if overrides else scenario))
    with err_console.status("predicting ...") if not args.json else contextlib.nullcontext():
        rows = comparing.compare(scenarios)
    if args.run:
        from testbed.emulation.run import Runner, default_run_dir
        from testbed.planning.plan import prepare

        rows = [comparing.with_run(row, Runner(prepare(scenario), default_run_dir(scenario)).execute())
                for row, (_, scenario) in zip(rows, scenarios)]
    if plot_file is not None:
        err_console.print(f"plot: {escape(str(comparing.plot(rows, plot_file)))}", highlight=False)
    if args.json:
        print(json.dumps([row.to_json() for row in rows], indent=1))
        return 0
    table = Table(title="predicted iteration time" + (" and emulated" if args.run else ""))
    columns = ["scenario", "fabric", "GPUs", "predicted (ms)", "compute (ms)", "communication (ms)", "dark (ms)",
               "vs first"] + (["emulated mean (ms)", "faithful"] if args.run else [])
    for column in columns:
        table.add_column(column, justify="left" if column in ("scenario", "fabric") else "right")
    for row in rows:
        part = row.breakdown
        cells = [row.name, row.fabric, str(row.hosts), f"{row.predicted_s * 1e3:.3f}",
                 f"{part.get('compute_s', 0) * 1e3:.3f}", f"{part.get('communication_s', 0) * 1e3:.3f}",
                 f"{part.get('reconfiguration_s', 0) * 1e3:.3f}",
                 f"{row.predicted_s / rows[0].predicted_s:.2f}x" if rows[0].predicted_s > 0 else "n/a"]
        if args.run:
            mean = sum(row.emulated_s or [0]) / max(1, len(row.emulated_s or []))
            cells += [f"{mean * 1e3:.3f}", "yes" if row.faithful else "no"]
        table.add_row(*cells)
    console.print(table)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from testbed.interface import field_reference

    # Plain print: rich would wrap the tables and read [..] as markup.
    print(field_reference.reference_markdown() if args.markdown else field_reference.json_schema(), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="testbed", description="Emulate ML-training interconnects with real packets.")
    parser.add_argument("--version", action="version", version=f"testbed {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    doctor = sub.add_parser("doctor", help="what this machine can emulate")
    doctor.add_argument("--calibrate", action="store_true", help="measure capacity, timers, INA node rate")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(func=cmd_doctor)
    check = sub.add_parser("check", help="validate a scenario as a prediction would use it (no root needed)")
    check.add_argument("scenario")
    check.add_argument("--json", action="store_true", help="ok, warnings and skipped trace nodes, or the error")
    check.set_defaults(func=cmd_check)
    pred = sub.add_parser("predict", help="analytic iteration time of a scenario (no root needed)")
    pred.add_argument("scenario")
    pred.add_argument("--json", action="store_true")
    pred.add_argument("--plans", metavar="DIR", help="write the circuit or wavelength plans the prediction used "
                      "over one iteration: DIR/plans.json and DIR/plans.png")
    pred.add_argument("--schedule", help="predict this schedule.json on the scenario's fabric instead")
    pred.set_defaults(func=cmd_predict)
    place = sub.add_parser("place", help="place a model workload: schedule.json and traffic_matrix.csv (no root)")
    place.add_argument("scenario")
    place.add_argument("--out", required=True, help="directory for schedule.json and traffic_matrix.csv")
    place.add_argument("--json", action="store_true", help="the placement per GPU as JSON")
    place.set_defaults(func=cmd_place)
    export = sub.add_parser("export-chakra", help="the scenario's schedule as Chakra execution traces (no root)")
    export.add_argument("scenario")
    export.add_argument("--out", required=True, help="directory for <name>.<rank>.et, one file per GPU")
    export.set_defaults(func=cmd_export_chakra)
    srch = sub.add_parser("search", help="best (mp, dp, batch) for a placed model by time to accuracy, or the "
                                         "fastest (tp, pp, dp, micro-batch) for a large model that fits (no root)")
    srch.add_argument("scenario")
    srch.add_argument("--gpus", type=int, help="number of GPUs (default: fabric.hosts)")
    srch.add_argument("--top", type=int, default=1, metavar="N", help="list the N best candidates with breakdowns")
    srch.add_argument("--json", action="store_true")
    srch.set_defaults(func=cmd_search)
    run = sub.add_parser("run", help="emulate a scenario and write its run directory")
    run.add_argument("scenario")
    run.add_argument("--out", help="run directory (default runs/<name>-<timestamp>)")
    run.add_argument("--cli", action="store_true", help="open Mininet's CLI on the live fabric after the iterations")
    run.add_argument("--hold", action="store_true",
                     help="keep the fabric and its northbound API up after the iterations until Ctrl-C")
    run.add_argument("--capture", type=int, default=0, metavar="PACKETS",
                     help="write the first PACKETS packets to capture.pcap in the run directory (on an ina "
                          "fabric, what the aggregation node sends and receives; else what GPU 0 does)")
    run.set_defaults(func=cmd_run)
    sweep = sub.add_parser("sweep", help="run a scenario over the cross product of parameter values; resumable")
    sweep.add_argument("scenario")
    sweep.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2",
                       help="a dotted scenario field and its values, e.g. fabric.gpu_bandwidth_gbps=100,400,1600")
    sweep.add_argument("--out", help="sweep directory (default sweeps/<name>-<timestamp>); an existing one resumes")
    sweep.add_argument("--predict-only", action="store_true",
                       help="answer every point with the oracle alone (any scale, no root)")
    sweep.add_argument("--ray", metavar="ADDRESS",
                       help="run the points on the Ray cluster at ADDRESS (`local`: start one on this machine); "
                            "an emulated point needs a machine with the `testbed` resource")
    sweep.add_argument("--shard", metavar="I/N",
                       help="run only the points whose index is I modulo N (0 <= I < N), e.g. one job of a SLURM "
                            "array; join the shards with `testbed sweep-merge`")
    sweep.set_defaults(func=cmd_sweep)
    merge = sub.add_parser("sweep-merge", help="join the directories of a sharded sweep into one with one results.csv")
    merge.add_argument("directories", nargs="+", help="the shards' sweep directories")
    merge.add_argument("--out", required=True, help="the joined sweep directory (may be one of the shards')")
    merge.set_defaults(func=cmd_sweep_merge)
    rep = sub.add_parser("report", help="figures and a one-page summary of a run or sweep directory")
    rep.add_argument("directory")
    rep.add_argument("--out", help="write report.md and the figures here instead of into the directory")
    rep.set_defaults(func=cmd_report)
    comp = sub.add_parser("compare", help="several scenarios side by side: predicted time and breakdown (no root)")
    comp.add_argument("scenarios", nargs="+", help="scenario files, e.g. one workload on several fabrics")
    comp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="a dotted field set in every scenario, e.g. fabric.hosts=1024")
    comp.add_argument("--json", action="store_true")
    comp.add_argument("--plot", metavar="PNG", help="bar chart of the breakdowns")
    comp.add_argument("--run", action="store_true", help="also emulate each scenario (root)")
    comp.set_defaults(func=cmd_compare)
    schema = sub.add_parser("schema", help="the scenario file's JSON schema, or with --markdown its field reference")
    schema.add_argument("--markdown", action="store_true",
                        help="every field of every section and kind (docs/scenario.md)")
    schema.set_defaults(func=cmd_schema)
    clean = sub.add_parser("clean", help="remove what dead runs of this tool left behind (and nothing else)")
    clean.set_defaults(func=cmd_clean)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("testbed")
    except PackageNotFoundError:  # run from a checkout without installing it
        return "(not installed)"


@contextlib.contextmanager
def _stdout_for_python_only() -> Iterator[None]:
    """While a `--json` command runs, what native libraries write to file descriptor 1 (HiGHS's
    `HighsMipSolverData::...` lines while planning circuits and wavelengths) goes to stderr, and
    Python's own output, the JSON, to stdout: `testbed predict --json | jq` reads JSON alone."""
    sys.stdout.flush()
    try:  # Python's stdout may be no file at all (a test's capture): then it keeps it
        python_on_fd1 = sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError):
        python_on_fd1 = False
    saved = os.dup(1)
    python_stdout = sys.stdout
    try:
        os.dup2(2, 1)
        if python_on_fd1:
            sys.stdout = open(saved, "w", closefd=False)  # noqa: SIM115  # closed below
        yield
    finally:
        sys.stdout.flush()
        if python_on_fd1:
            sys.stdout.close()
            sys.stdout = python_stdout
        os.dup2(saved, 1)
        os.close(saved)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "json", False):
            with _stdout_for_python_only():
                return int(args.func(args))
        return int(args.func(args))
    except TestbedError as error:
        # The sentence may quote the input, markup-like text included: print it as it is.
        err_console.print(f"[red]error[/]: {escape(str(error))}", highlight=False, soft_wrap=True)
        return error.exit_code
    except KeyboardInterrupt:
        err_console.print("[red]interrupted[/]")
        return 1


if __name__ == "__main__":
    sys.exit(main())

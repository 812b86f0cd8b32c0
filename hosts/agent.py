"""The per-GPU agent: runs this host's part of schedule.json over real sockets and records events.

Run inside a Mininet host as `python -m hosts.agent --config FILE --rank R`. SIGUSR1 makes it
write what it is waiting for (`h<rank>.waiting.json`); SIGTERM stops it, keeping the iterations it
completed in its result file.
"""

from __future__ import annotations

import argparse
import gc
import json
import signal
import sys
import time
import traceback
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from hosts import ops
from hosts.collectives import STOP, StepRecord, ring_barrier
from hosts.dag_round import ended_at, run_dag_round
from hosts.data import digest
from hosts.timing import (
    background_priority,
    compute_timing,
    lower_priority,
    lower_timer_slack,
    precise_sleep,
    wait_until,
)
from hosts.transport import SendHandle, TcpTransport
from testbed.model.contracts import AgentConfig
from testbed.model.schedule import CollectiveStep, ComputeStep, RecvStep, Schedule, SendStep, Step
from testbed.shared.collective_plans import barrier_ring_next
from testbed.shared.progress_lines import parse_progress, progress_line

BARRIER_TAG = 0xF0000000
CHANNEL_BITS = 12  # tags per collective in a DAG schedule: a ring all-reduce of 1,024 takes 2,046
WARMUP_DATA_BASE = 1_000_000
# Several jobs start their first measured round this long (wall) after the last rank finished its
# warm-up: every job's first rank sees that rank's line within a poll and its barrier's trip.
MEASURE_START_S = 1.0


class Stopped(Exception):
    """The runner ended this agent (SIGTERM): what completed is kept."""


def data_seed(seed: int, group: list[int]) -> int:
    """Disjoint groups (concurrent jobs, DP groups) get different data, so a sum that mixed two
    groups' buffers cannot pass the check; the group of rank 0 keeps the scenario's seed."""
    return seed + 1_000_003 * min(group)


class Agent:
    def __init__(self, config: AgentConfig, rank: int) -> None:
        self.config = config
        self.rank = rank
        self.dilation = config.dilation
        self.byte_scale = config.byte_scale
        self.epoch = config.epoch_monotonic_s
        schedule = Schedule.from_json(json.loads(Path(config.schedule).read_text()))
        self.hosts = schedule.hosts
        mine = next((job for job in config.jobs if rank in job.hosts), None)
        # The ranks this agent keeps its barrier with: its job's (several jobs), or every host.
        self.group = list(mine.hosts) if mine is not None else list(range(self.hosts))
        self.iterations_planned = mine.iterations if mine is not None else schedule.iterations
        # Several jobs: after its measured iterations a job keeps loading the fabric (if it has any
        # step) until every job has its own, so each job's measured iterations overlap the others'.
        self.paced = bool(config.jobs)
        self.loads_fabric = self.paced and any(schedule.gpus[g].steps for g in self.group)
        self.warmups = config.warmup_iterations
        self.steps: tuple[Step, ...] = schedule.gpus[rank].steps
        self.dag = schedule.execution == "dag"
        self.events: list[dict] = []
        self.compute_waits: list[tuple[float, float]] = []  # (target, overshoot) of each compute step
        sends = [self._emulated(s.bytes) for s in self.steps if isinstance(s, SendStep)]
        recvs = [self._emulated(s.bytes) for s in self.steps if isinstance(s, RecvStep)]
        self.payload = np.zeros(max(sends, default=1), dtype=np.uint8)
        self.scratch = np.empty(max(recvs, default=1), dtype=np.uint8)
        self.ina: Any = None  # the INA endpoint (hosts.ina.client, imported only where INA runs)
        self.ina_jobs: dict[tuple[int, ...], Any] = {}
        self._schedule = schedule
        self.iterations: list[dict] = []  # the measured iterations this host completed
        self.kept_events = 0  # events up to the end of the last completed iteration
        # Where this host is, for the runner's stall report: the round and the step it is in.
        self.position: dict = {"round": None, "iteration": None, "step": "start-up"}
        self.transport: TcpTransport | None = None
        self.outputs: dict[int, np.ndarray | None] = {}  # per step, made with the round's inputs
        self.barrier_learned: dict = {}  # how long the barrier's start token took around the ring

    def waiting_report(self) -> dict:
        """Where this host is and what each of its threads waits for (the runner asks on a stall)."""
        now = time.monotonic()
        waits = self.transport.board.snapshot() if self.transport is not None else []
        for wait in waits:
            wait["for_s"] = now - wait.pop("since_monotonic_s")
        return {"rank": self.rank, **self.position, "warmup": self.position["round"] is not None
                and self.position["round"] < self.warmups, "waits": waits}

    def _connect_ina(self) -> None:
        """Registers this host's INA jobs with the aggregation node (before anything is timed)."""
        from hosts.ina.client import InaEndpoint, job_ids

        ina = self.config.ina
        assert ina is not None  # only INA schedules connect
        addresses = self.config.rank_addresses
        self.ina = InaEndpoint(addresses[self.rank], ina.node, ina.rto_s, latency_wait=precise_sleep,
                               min_rto=ina.min_rto_s, link_rate_bps=ina.link_rate_bps)
        for group, job in job_ids(self._schedule).items():
            if self.rank in group:
                self.ina_jobs[group] = self.ina.register(job, group.index(self.rank),
                                                         tuple(addresses[g] for g in group), ina.window)

    def _event(self, kind: str, start: float, end: float, iteration: int, **fields) -> None:
        self.events.append(self._make_event(kind, start, end, iteration, **fields))

    def _make_event(self, kind: str, start: float, end: float, iteration: int, **fields) -> dict:
        return {
            "t_s": (start - self.epoch) / self.dilation,
            "t_emulated_s": start - self.epoch,
            "duration_s": (end - start) / self.dilation,
            "host": self.rank,
            "iteration": iteration,
            "kind": kind,
            **fields,
        }

    def _step_events(self, step_id: str, iteration: int, records: list[StepRecord]) -> None:
        for r in records:
            real_bytes = round(r.bytes / self.byte_scale)
            common = dict(step=step_id, phase=r.phase, index=r.step, bytes=real_bytes, emulated_bytes=r.bytes)
            if r.send_peer is not None:
                self._event("send", r.start_s, r.end_s, iteration, peer=r.send_peer, **common)
            if r.recv_peer is not None:
                self._event("recv", r.start_s, r.end_s, iteration, peer=r.recv_peer, **common)

    def _inputs(self, iteration: int) -> dict[int, np.ndarray | None]:
        """Each collective step's input buffer, made before the iteration starts (no timed work)."""
        buffers: dict[int, np.ndarray | None] = {}
        for index, step in enumerate(self.steps):
            if not isinstance(step, CollectiveStep):
                continue
            if not ops.supported(step.op, step.algorithm):
                raise ValueError(f"step {step.id}: unsupported step {step}")
            group = list(step.group)
            if self.rank not in group:  # a CPU machine: it only sums what the GPUs push
                buffers[index] = None
                continue
            elements = ops.elements_for(step.op, round(step.bytes * self.byte_scale), len(group))
            buffers[index] = ops.make_input(step.op, data_seed(self.config.seed, group), iteration,
                                            group.index(self.rank),
                                            len(group), elements)
            self.outputs[index] = ops.output_buffer(step.op, buffers[index])
        return buffers

    def _emulated(self, size_bytes: int) -> int:
        return max(1, round(size_bytes * self.byte_scale))

    @staticmethod
    def _tag(tag: str, round_: int) -> int:
        """Schedule tags are strings; the wire carries numbers between the collectives' tags (below
        2**31) and the barrier's (from 0xF0000000)."""
        return 0x80000000 + zlib.crc32(f"{round_}/{tag}".encode()) % 0x70000000

    def _run_round(self, iteration: int, round_: int, transport: TcpTransport,
                   inputs: dict[int, np.ndarray | None]) -> tuple[list[dict], float]:
        """Every step in schedule order: computes wait their dilated time, sends are posted, receives
        block until their message is in, collectives run with real data. Returns the collectives'
        outcomes and when the last step finished."""
        if self.dag:
            return run_dag_round(self.steps, lambda index: self._step(index, iteration, round_, transport, inputs),
                                 self.position)
        handles: list[SendHandle] = []
        outcomes = []
        end = time.monotonic()  # a round without steps ends at once
        for index, step in enumerate(self.steps):
            self.position["step"] = step.id
            outcome = self._step(index, iteration, round_, transport, inputs, handles)
            if outcome is not None:
                outcomes.append(outcome)
            end = max(end, ended_at(outcome))
        self.position["step"] = "the round's last sends"
        for handle in handles:
            handle.wait(600.0)
        return outcomes, end

    def _step(self, index: int, iteration: int, round_: int, transport: TcpTransport,
              inputs: dict[int, np.ndarray | None], posted: list[SendHandle] | None = None) -> dict | None:
        """One step; a collective's outcome. A send is posted onto `posted` (in order), or waited
        for until it is delivered (in a DAG, where later steps may depend on it): sent eagerly, as
        ASTRA-sim and NCCL send, so delivery never waits for the matching receive."""
        step = self.steps[index]
        began = time.monotonic()
        if isinstance(step, ComputeStep):
            if round_ < self.warmups:
                # A warm-up round is for connections, TCP windows and page faults: its messages
                # and collectives run, its compute is not waited out (it would only cost wall time).
                return None
            target = step.compute_us * 1e-6 * self.dilation
            self.compute_waits.append((target, precise_sleep(target)))
            self._event("compute", began, time.monotonic(), iteration, step=step.id, compute_us=step.compute_us)
        elif isinstance(step, SendStep):
            size = self._emulated(step.bytes)
            handle = transport.send(step.peer, self._tag(step.tag, round_), self.payload[:size], eager=True)
            if posted is None:
                handle.wait(600.0)
            else:
                posted.append(handle)
            self._event("send", began, began if posted is not None else time.monotonic(), iteration,
                        step=step.id, peer=step.peer, bytes=step.bytes, emulated_bytes=size, tag=step.tag)
        elif isinstance(step, RecvStep):
            size = self._emulated(step.bytes)
            transport.recv_into(step.peer, self._tag(step.tag, round_), self.scratch[:size])
            self._event("recv", began, time.monotonic(), iteration, step=step.id, peer=step.peer,
                        bytes=step.bytes, emulated_bytes=size, tag=step.tag)
        else:
            return self._run_step(step, inputs[index], iteration, round_, transport, self.outputs.get(index))
        return None

    def _run_step(self, step: CollectiveStep, data: np.ndarray | None, iteration: int, round_: int,
                  transport: TcpTransport, out: np.ndarray | None = None) -> dict:
        group = list(step.group)
        if step.algorithm == "ina":
            assert data is not None  # every INA worker holds a buffer
            return self._run_ina_step(step, data, iteration)
        start = time.monotonic()
        # Collectives of a DAG run at once and take tags of their own channel; in order, one at a time.
        tag_base = (step.channel + 1) << CHANNEL_BITS if step.channel is not None else (round_ + 1) << 16
        result, records = ops.run(step.op, step.algorithm, transport, group, data, tag_base=tag_base,
                                  services=step.services or (), chunks=step.chunks or 0, out=out)
        end = max((r.end_s for r in records), default=time.monotonic())
        self._step_events(step.id, iteration, records)
        self._event("collective", start, end, iteration, step=step.id, op=step.op, algorithm=step.algorithm,
                    bytes=step.bytes, emulated_bytes=int(data.nbytes) if data is not None else 0)
        # Rate seen by the receiver, over the transfer alone (each step includes the sender's alpha
        # wait); a send-only step ends once the kernel has buffered it, so it says nothing of rate.
        busy = [(r.recv_bytes, r.end_s - r.start_s - transport.latency.target_s) for r in records if r.recv_bytes]
        rates = [size * 8 / seconds for size, seconds in busy if seconds > 0]
        if result is None or data is None:  # a CPU machine holds no result to check
            return {"step_rates_bps": rates, "end_s": end}
        return {"result": result, "elements": data.size, "step_rates_bps": rates, "end_s": end,
                "op": step.op, "group_size": len(group), "pos": group.index(self.rank),
                "seed": data_seed(self.config.seed, group)}

    def _run_ina_step(self, step: CollectiveStep, data: np.ndarray, iteration: int) -> dict:
        group = list(step.group)
        latency_s = self.config.latency_s * self.dilation
        start = time.monotonic()
        records = self.ina_jobs[tuple(group)].allreduce(data, latency_s)
        end = time.monotonic()
        self._step_events(step.id, iteration, records)
        self._event("collective", start, end, iteration, step=step.id, op=step.op, algorithm="ina",
                    bytes=step.bytes, emulated_bytes=int(data.nbytes))
        # The link rate is judged on the data round (the exponent round is one packet per 360 chunks).
        rates = [r.recv_bytes * 8 / (r.end_s - r.start_s - latency_s) for r in records
                 if r.phase == "sum" and r.end_s - r.start_s > latency_s]
        return {"result": data, "elements": data.size, "step_rates_bps": rates, "end_s": end,
                "op": step.op, "group_size": len(group), "pos": group.index(self.rank),
                "seed": data_seed(self.config.seed, group)}

    def run(self) -> dict:
        addresses = self.config.rank_addresses
        latency_s = self.config.latency_s * self.dilation
        transport = TcpTransport(self.rank, addresses, self.config.port, latency_s=latency_s,
                                 connect_timeout_s=self.config.connect_timeout_s)
        self.transport = transport
        # Ring neighbours carry both the barrier and the ring collectives: connect before timing.
        self.position["step"] = "connecting to its ring neighbour"
        transport.connect_all([barrier_ring_next(self.rank, self.group)])
        if self.config.ina is not None:
            self.position["step"] = "registering with the aggregation node"
            self._connect_ina()
        # The runner times faults from the moment every rank is connected (docs/faults.md).
        (Path(self.config.out_dir) / f"h{self.rank}.connected").touch()
        last = self.warmups + self.iterations_planned  # rounds after `last` only load the fabric
        round_ = 0
        while round_ < last or self.loads_fabric:
            # Warm-up and loading rounds use their own data and record nothing; measured ones count from 0.
            measured = self.warmups <= round_ < last
            iteration = round_ - self.warmups if measured else WARMUP_DATA_BASE + round_
            with background_priority():
                inputs = self._inputs(iteration)
            self.position.update(round=round_, iteration=iteration if measured else None,
                                 step="the barrier before the round")
            arrive = time.monotonic()
            start_at = ring_barrier(transport, self.group, BARRIER_TAG + 2 * round_, learned=self.barrier_learned,
                                    go=self._go(round_, last) if self.paced else None)
            self._count_tcp_until_now()
            if start_at == STOP:
                break
            # Read before the start, not after: every host wakes at once on a machine with fewer
            # cores than hosts, and a quarter millisecond of parsing /proc each delayed the round's
            # first messages by a few emulated microseconds under dilation (nothing is sent between).
            tcp_before = tcp_counters()
            events_before = len(self.events)
            wait_until(start_at, spin=False)
            start = time.monotonic()
            # The iteration ends when its last step is done; checking and bookkeeping are not timed,
            # nor is Python's garbage collection, which may take milliseconds of wall time at any
            # allocation (as timeit keeps it out): it runs between rounds, at idle priority.
            gc.disable()
            try:
                outcomes, end = self._run_round(iteration, round_, transport, inputs)
            finally:
                gc.enable()
            with background_priority():
                gc.collect()
            if not measured:
                del self.events[events_before:]
                self._progressed(round_)
                round_ += 1
                continue
            with background_priority():  # results are checked once this rank is out of the round
                for outcome in outcomes:
                    if "result" in outcome:
                        outcome["digest"] = digest(outcome.pop("result"))
            self.events.insert(events_before, self._make_event("barrier", arrive, start, iteration))
            self._event("iteration", start, end, iteration)
            self.iterations.append({
                "iteration": iteration,
                "start_s": start,
                "end_s": end,
                "start_overshoot_s": start - start_at,
                **{key: after - before for key, after, before in
                   zip(("tcp_retransmits", "tcp_timeouts"), tcp_counters(), tcp_before)},
                "tcp_base": tcp_before,  # counted on to the next barrier (_count_tcp_until_now)
                "digests": [o["digest"] for o in outcomes if "digest" in o],
                "elements": [o["elements"] for o in outcomes if "digest" in o],
                "checks": [{k: o[k] for k in ("op", "group_size", "pos", "elements", "digest", "seed")}
                           for o in outcomes if "digest" in o],
                "step_rates_bps": [r for o in outcomes for r in o["step_rates_bps"]],
            })
            self.kept_events = len(self.events)
            # Said only once the iteration is recorded: a run stopped after the runner saw it done
            # keeps it (the check above runs at idle priority and may come a while after `end`).
            self._progressed(round_)
            round_ += 1
        # Hold the connections until everyone is done, so no rank's close races a peer's last recv.
        self.position.update(round=None, iteration=None, step="the final barrier")
        ring_barrier(transport, self.group, BARRIER_TAG - 2)
        self._count_tcp_until_now()
        transport.close()
        ina_counters = None
        if self.ina is not None:
            self.ina.close()  # stops this host's fallback aggregators, which report their counters
            ina_counters = self.ina.counters()
        return {**self.summary(), "ok": True, "ina": ina_counters}

    def _go(self, round_: int, last: int):
        """What the first rank of a job decides once its job has arrived at a round's barrier, from
        every rank's progress lines (each rank writes its line before it arrives, so its own job's
        are there): the first measured round waits until every job has warmed up and starts at a
        time every job's first rank derives alike (so the jobs start measuring together, as the
        oracle starts them); a round after the measured ones runs only while some job still lacks
        its measured iterations (None: stop)."""
        ranks = [h for job in self.config.jobs for h in job.hosts]

        def go() -> float | None:
            if not self.config.progress:  # nothing to pace by: each job runs its own rounds alone
                return 0.0 if round_ < last else None
            if round_ == self.warmups and self.warmups > 0:
                self.position["step"] = "waiting for every job to warm up"
                while True:
                    done, ended = self._rounds_done()
                    if all(done.get(h, 0) >= self.warmups for h in ranks):
                        return max(ended[(h, self.warmups - 1)] for h in ranks) + MEASURE_START_S
                    time.sleep(0.005)
            if round_ < last:
                return 0.0
            done, _ = self._rounds_done()
            finished = all(done.get(h, 0) >= self.warmups + job.iterations
                           for job in self.config.jobs for h in job.hosts)
            return None if finished else 0.0
        return go

    def _rounds_done(self) -> tuple[dict[int, int], dict[tuple[int, int], float]]:
        """Rounds each rank has finished, and when each (rank, round) ended, from the progress file
        every rank appends to."""
        done: dict[int, int] = {}
        ended: dict[tuple[int, int], float] = {}
        try:
            text = Path(self.config.progress).read_text() if self.config.progress else ""
        except OSError:
            return done, ended
        for rank, round_, ended_s in parse_progress(text):
            done[rank] = max(done.get(rank, 0), round_ + 1)
            ended[(rank, round_)] = ended_s
        return done, ended

    def _count_tcp_until_now(self) -> None:
        """The last measured iteration's TCP counters run on until every host is past it (the
        barrier after it): a sender whose round is over may still be recovering a lost segment that
        a slower receiver waits for, and that recovery belongs to the iteration it delayed."""
        if self.iterations and "tcp_base" in self.iterations[-1]:
            last = self.iterations[-1]
            base = last.pop("tcp_base")
            last["tcp_retransmits"], last["tcp_timeouts"] = (now - was for now, was in zip(tcp_counters(), base))

    def _progressed(self, round_: int) -> None:
        """One line per finished round (warm-ups too) from every rank: the runner's watchdog and
        progress bar read them; a short append is one write, so ranks' lines never interleave."""
        if self.config.progress:
            with open(self.config.progress, "a") as progress:
                progress.write(progress_line(self.rank, round_, time.monotonic()))

    def summary(self) -> dict:
        """What this host measured over its completed iterations."""
        transport = self.transport
        overshoots = np.array((transport.latency.overshoots_s if transport else None) or [0.0])
        return {
            "compute_timing": compute_timing(self.compute_waits),
            "rank": self.rank,
            "iterations": [{k: v for k, v in it.items() if k != "tcp_base"} for it in self.iterations],
            "latency": {
                "target_s": transport.latency.target_s if transport else 0.0,
                "count": len(transport.latency.overshoots_s) if transport else 0,
                "overshoot_mean_s": float(overshoots.mean()),
                "overshoot_p99_s": float(np.percentile(overshoots, 99)),
            },
        }


def tcp_counters() -> tuple[int, int]:
    """(segments retransmitted, retransmission timeouts) of this host's network namespace, from
    /proc/net/snmp and /proc/net/netstat. A fast retransmit is TCP's ordinary answer to a full
    queue; a timeout stalls the connection for at least 200 ms of wall time. Timeouts TCP itself
    found spurious (the segment was late, not lost: a 16-GPU scatter's root queues fifteen
    messages in its own shaped link, longer than the timeout its earlier round trips set) are not
    counted: the connection did not wait for a retransmission, and its window was restored."""
    def field(path: str, prefix: str, name: str) -> int:
        try:
            rows = [line.split() for line in open(path) if line.startswith(prefix)]
            return int(rows[1][rows[0].index(name)])
        except (OSError, IndexError, ValueError):
            return 0

    timeouts = field("/proc/net/netstat", "TcpExt:", "TCPTimeouts") - field("/proc/net/netstat", "TcpExt:",
                                                                             "TCPSpuriousRTOs")
    return field("/proc/net/snmp", "Tcp:", "RetransSegs"), max(0, timeouts)


def _completed(agent: Agent | None, rank: int) -> dict:
    """A result for an agent that did not finish: the iterations it completed and their events,
    never the half-done one."""
    if agent is None:
        return {"rank": rank, "ok": False, "iterations": []}
    del agent.events[agent.kept_events:]
    return {**agent.summary(), "ok": False}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True)
    parser.add_argument("--rank", type=int, required=True)
    args = parser.parse_args(argv)
    config = AgentConfig.loads(Path(args.config).read_text(), where=args.config)
    out_dir = Path(config.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    slack = lower_timer_slack()
    if config.niceness:
        lower_priority(config.niceness)
    agent = None

    def stop(signum, frame):
        raise Stopped("stopped by the runner")

    def report(signum, frame):
        if agent is not None:
            path = out_dir / f"h{args.rank}.waiting.json"
            path.with_suffix(".tmp").write_text(json.dumps(agent.waiting_report()))
            path.with_suffix(".tmp").replace(path)  # the runner never reads half a report

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGUSR1, report)
    (out_dir / f"h{args.rank}.started").touch()  # SIGUSR1 is safe from now on (by default it kills)
    try:
        agent = Agent(config, args.rank)
        result = agent.run()
        result["timer_slack_lowered"] = slack
        code = 0
    except Stopped:
        result = {**_completed(agent, args.rank), "stopped": True, "error": "stopped by the runner"}
        code = 1
    except Exception as error:  # reported to the runner through the result file
        result = {**_completed(agent, args.rank), "error": f"{type(error).__name__}: {error}",
                  "traceback": traceback.format_exc()}
        code = 1
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the files below are written whole
    if agent is not None:
        with open(out_dir / f"h{args.rank}.events.jsonl", "w") as events:
            for event in agent.events:
                events.write(json.dumps(event) + "\n")
    (out_dir / f"h{args.rank}.result.json").write_text(json.dumps(result, indent=1) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())

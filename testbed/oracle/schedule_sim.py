"""Oracle for any schedule (testbed-schedule/1 or a Chakra trace): a step starts once its
dependencies are done (in an in-order schedule, on its GPU's last blocking step too: see
schedule.in_order_deps). A GPU runs one compute at a time, the lowest ready step first; transfers
and collectives run beside it. Sends, and the data of ring collectives and all-to-alls, are flows
sharing the fabric max-min fairly with everything else in flight, their α terms added at the end;
a pair's messages share its one connection, so they move in the order they were sent;
tree, halving-doubling and broadcast collectives take their alpha-beta time at the rate their
group gets on the fabric's plan when every group running the same step sends at once; an INA
all-reduce is each member's stream of INA frames up its port and the sums back, as a flow.

Where the controller re-plans during a run (SiP-Ring, multi-shot SiP-OCS), so does the simulation,
with the controller's own rule (testbed.oracle.replanning.Replanner): at the end of every
estimation period it plans from the bytes each pair moved in that period; the controller's delay
later (testbed.oracle.retune_threshold simulates a range of them) the links whose capacity changes
go dark for the reconfiguration time (what both plans share carries on; flows over a dark link pause), and then
every transfer moves onto the new plan's paths."""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from testbed.core import progress
from testbed.fabrics.ina.node_links import window_slowdown
from testbed.fabrics.ina.section import InaFabric
from testbed.model.errors import InputError
from testbed.model.fabric_section import FabricSection
from testbed.model.schedule import (
    CollectiveStep,
    ComputeStep,
    RecvStep,
    Schedule,
    SendStep,
    Step,
    in_order_deps,
)
from testbed.model.units import bytes_to_bits, us_to_s
from testbed.network.collectives import (
    Breakdown,
    Prediction,
    collective_cost,
    ina_payload_equivalent_bytes,
)
from testbed.network.flow_model import FlowModel
from testbed.network.flows import Flow, max_min_rates
from testbed.oracle.fabrics import schedule_flow_model
from testbed.oracle.replanning import LiveReplans, replans_during_run
from testbed.oracle.stepwise import STEPWISE, StepwiseCollective
from testbed.shared.collective_plans import collective_edges

# Simulation rounds (events) between progress reports: cheap beside the rounds themselves.
PROGRESS_ROUNDS = 2048
# Sets of flows whose max-min rates are kept at once (per plan in force).
RATES_MEMO_SIZE = 4096
# A message moved alone when its rate stayed within this share of its path's capacity.
ALONE_TOLERANCE = 0.02

# Collectives whose alpha-beta bandwidth term is the busiest GPU's bytes over its rate: their data
# is simulated as flows (exactly that time alone, and slowed by whatever else shares a link).
FLUID = {("allreduce", "ring"), ("reducescatter", "ring"), ("allgather", "ring"), ("gather", "direct"),
         ("scatter", "direct")}


class _Dag:
    def __init__(self, schedule: Schedule, fabric: FabricSection, lag_s: float,
                 carried: tuple[FlowModel, LiveReplans] | None = None,
                 paths: dict[tuple[int, int], tuple[Any, ...]] | None = None) -> None:
        """One iteration from the plan for its whole traffic, or (`carried`) from where the previous
        iteration left the plan in force and the controller; `paths`: pairs whose resources are
        given (a replica's edges to the next replica, testbed.oracle.replicas)."""
        n = self.hosts = schedule.hosts
        self.steps: list[tuple[Step, ...]] = [g.steps for g in sorted(schedule.gpus, key=lambda g: g.rank)]
        self.model = carried[0] if carried else schedule_flow_model(fabric, n, schedule.traffic(), schedule.partitions)
        if paths:
            self.model = replace(self.model, paths={**self.model.paths, **paths})
        self.alpha = us_to_s(fabric.latency_us)
        self.fabric = fabric
        self.static_rate = collective_rates_bps(self.steps, self.model)
        index = [{s.id: i for i, s in enumerate(gpu)} for gpu in self.steps]
        deps = [[s.deps for s in gpu] for gpu in self.steps]
        if schedule.execution == "in-order":
            deps = [[data + ctrl for data, ctrl in in_order_deps([(s.id, s.kind, s.deps) for s in gpu])]
                    for gpu in self.steps]
        self.waiting = [[len(d) for d in gpu] for gpu in deps]
        self.dependants: list[list[list[int]]] = [[[] for _ in gpu] for gpu in self.steps]
        for g, gpu in enumerate(deps):
            for i, step_deps in enumerate(gpu):
                for dep in step_deps:
                    self.dependants[g][index[g][dep]].append(i)
        self.done = [[False] * len(gpu) for gpu in self.steps]
        self.began = [[math.nan] * len(gpu) for gpu in self.steps]  # when each step started and ended
        self.ended = [[math.nan] * len(gpu) for gpu in self.steps]
        self.compute_s = [0.0] * n
        self.gpu_end_s = [0.0] * n  # when each GPU's last step so far finished
        self.ready_computes: list[list[int]] = [[] for _ in range(n)]
        self.computing = [False] * n
        self.last_compute_end_s = 0.0
        self.timers: list[tuple[float, int, tuple[Any, ...]]] = []
        self.flows: list[tuple[tuple[Any, ...], Flow, float]] = []  # (owner, flow, bits left)
        self.pairs: dict[int, tuple[int, int]] = {}  # id(flow) -> (source, destination)
        # Per pair, the messages on its connection: the first is moving, the rest wait behind it.
        self.pair_queues: dict[tuple[int, int], list[tuple[tuple[Any, ...], float]]] = {}
        self.arrived: dict[tuple[int, int, str], float] = {}  # (src, dst, tag) -> when it arrived
        self.receiving: dict[tuple[int, int, str], tuple[int, int]] = {}
        self.rendezvous: dict[tuple[Any, ...], list[tuple[int, int]]] = defaultdict(list)
        self.members_here: dict[tuple[Any, ...], int] = {}  # a collective's members among this schedule's GPUs
        self.flows_left: dict[tuple[Any, ...], int] = {}
        self.stepwise: dict[tuple[Any, ...], StepwiseCollective] = {}
        self.now = 0.0
        self._seq = 0
        self.sent_at: dict[tuple[int, int], float] = {}
        self.send_began: dict[tuple[int, int, str], float] = {}  # (src, dst, tag) -> when it was sent
        self.rate_range: dict[tuple[int, int], tuple[float, float]] = {}  # a moving send's lowest and highest rate
        self.message_bps: dict[tuple[int, int, str], float] = {}  # (src, dst, tag) -> its average rate
        self.replans = carried[1] if carried else (
            LiveReplans(fabric, n, tuple(sorted(schedule.traffic())), schedule.partitions, lag_s)
            if replans_during_run(fabric) else None)
        self.plans: list[tuple[float, FlowModel]] = [(0.0, self.model)]  # each plan and when it took over
        self._rates_capacity: dict[Any, float] | None = None  # the capacities _rates_memo holds rates for
        self._rates_memo: dict[tuple[tuple[Any, ...], ...], list[float]] = {}

    def at(self, time_s: float, event: tuple[Any, ...]) -> None:
        self._seq += 1
        heapq.heappush(self.timers, (time_s, self._seq, event))

    def finish(self, g: int, i: int) -> None:
        self.done[g][i] = True
        self.ended[g][i] = self.now
        self.gpu_end_s[g] = self.now
        for j in self.dependants[g][i]:
            self.waiting[g][j] -= 1
            if self.waiting[g][j] == 0:
                self.start(g, j)

    def start(self, g: int, i: int) -> None:
        step = self.steps[g][i]
        self.began[g][i] = self.now
        if isinstance(step, ComputeStep):
            heapq.heappush(self.ready_computes[g], i)
            self.next_compute(g)
        elif isinstance(step, SendStep):
            self.sent_at[(g, i)] = self.now
            self.send_began[(g, step.peer, step.tag)] = self.now
            self.add_flow(("send", g, i), g, step.peer, step.bytes)
        elif isinstance(step, RecvStep):
            key = (step.peer, g, step.tag)
            if self.arrived.get(key, math.inf) <= self.now:
                self.finish(g, i)
            else:
                self.receiving[key] = (g, i)
        else:
            meeting = (step.id, step.group)
            self.rendezvous[meeting].append((g, i))
            # Members beyond the schedule's GPUs are other replicas' (testbed.oracle.replicas),
            # which reach the collective as this replica's members do.
            if meeting not in self.members_here:
                self.members_here[meeting] = sum(1 for m in step.group if m < self.hosts)
            if len(self.rendezvous[meeting]) == self.members_here[meeting]:
                self.launch(meeting, step)

    def next_compute(self, g: int) -> None:
        if self.computing[g] or not self.ready_computes[g]:
            return
        i = heapq.heappop(self.ready_computes[g])
        step = self.steps[g][i]
        assert isinstance(step, ComputeStep)  # only computes are queued
        duration = us_to_s(step.compute_us)
        self.began[g][i] = self.now  # a compute starts when the GPU is free, not when it is ready
        self.computing[g] = True
        self.compute_s[g] += duration
        self.at(self.now + duration, ("computed", g, i))

    def launch(self, key: tuple[Any, ...], step: CollectiveStep) -> None:
        group, op, algorithm, size = key[1], step.op, step.algorithm, step.bytes
        n = len(group)
        if (op, algorithm) in STEPWISE and n > 1:
            self.stepwise[key] = StepwiseCollective.of(op, algorithm, n, size)
            self.stepwise_moved(key, self.stepwise[key].start())
            for pos in range(n):
                self.stepwise_check(key, pos)
            return
        if algorithm == "ina":
            # Each member's stream to the aggregation node and the sums back: the flow of the GPU's
            # own pair, which an ina fabric's plan routes up and down its port (and through the node).
            slowdown = window_slowdown(self.fabric, n) if isinstance(self.fabric, InaFabric) else 1.0
            wire = ina_payload_equivalent_bytes(size) * slowdown
            for g in group:
                self.add_flow(("collective", key), g, g, wire)
            self.flows_left[key] = n
            return
        if (op, algorithm) not in FLUID:
            cost = collective_cost(op, algorithm, n, size, self.static_rate[key], self.alpha).time_s
            self.at(self.now + cost, ("collected", key))
            return
        # Another replica's member stands for its counterpart here (what leaves this member for it
        # is what arrives at this member from the replica before).
        edges = [(group[a], group[b] % self.hosts, bytes_) for a, b, bytes_ in collective_edges(op, algorithm, n, size)
                 if group[a] < self.hosts and a != b]
        for src, dst, bytes_ in edges:
            self.add_flow(("collective", key), src, dst, bytes_)
        self.flows_left[key] = len(edges)
        if not edges:
            self.at(self.now + self.alpha_part(key, step), ("collected", key))

    def add_flow(self, owner: tuple[Any, ...], src: int, dst: int, size: float) -> None:
        """A pair's messages share one connection: they move one after another, in the order they
        were sent, and the pair takes one share of the fabric (not one per message in flight)."""
        queue = self.pair_queues.setdefault((src, dst), [])
        queue.append((owner, size))
        if len(queue) == 1:
            self.start_flow(src, dst)

    def start_flow(self, src: int, dst: int) -> None:
        owner, size = self.pair_queues[(src, dst)][0]
        flow = Flow(self.now, size, self.model.resources(src, dst))
        self.pairs[id(flow)] = (src, dst)
        self.flows.append((owner, flow, bytes_to_bits(size)))

    def path_bps(self, src: int, dst: int) -> float:
        """The capacity of the pair's path in the current plan: its narrowest link's."""
        return min(self.model.capacity_bps[r] for r in self.model.resources(src, dst))

    def next_on_pair(self, flow: Flow) -> None:
        pair = self.pairs.pop(id(flow))
        queue = self.pair_queues[pair]
        queue.pop(0)
        if queue:
            self.start_flow(*pair)

    def stepwise_moved(self, key: tuple[Any, ...], messages: list[tuple[int, int, float]]) -> None:
        for src, dst, size in messages:
            self.add_flow(("stepwise", key, src, dst), key[1][src], key[1][dst], size)

    def stepwise_check(self, key: tuple[Any, ...], pos: int) -> None:
        """A member whose exchanges are all done has finished its collective step."""
        collective = self.stepwise[key]
        if collective.ranks[pos].current() is None and pos not in collective.finished:
            collective.finished.add(pos)
            if len(collective.finished) == len(collective.ranks):
                del self.stepwise[key]
            g = key[1][pos]
            self.finish(g, next(i for member, i in self.rendezvous[key] if member == g))

    def alpha_part(self, key: tuple[Any, ...], step: Step) -> float:
        assert isinstance(step, CollectiveStep)  # only collectives meet at a rendezvous
        if step.algorithm == "ina":
            return 2 * self.alpha  # the exponents' round, then the chunks'
        return collective_cost(step.op, step.algorithm, len(key[1]), step.bytes, math.inf, self.alpha).time_s

    def flow_done(self, owner: tuple[Any, ...]) -> None:
        if owner[0] == "send":
            _, g, i = owner
            step = self.steps[g][i]
            assert isinstance(step, SendStep)  # a send's flow
            # keyed by sender, receiver and tag: data-parallel replicas reuse the same tags
            key = (g, step.peer, step.tag)
            self.at(self.now + self.alpha, ("arrived", key))
            low, high = self.rate_range.pop((g, i), (0.0, 0.0))
            # A message that shared its path (a flow beside it) has no rate a link can be judged by:
            # how TCP splits a link between flows that start and end at different moments varies
            # from one iteration to the next. Only messages that moved alone, at their path's
            # capacity throughout, are kept.
            if self.now > self.sent_at[(g, i)] and low >= (1 - ALONE_TOLERANCE) * self.path_bps(g, step.peer) \
                    and high <= (1 + ALONE_TOLERANCE) * low:
                self.message_bps[key] = bytes_to_bits(step.bytes) / (self.now - self.sent_at[(g, i)])
            self.finish(g, i)
            return
        if owner[0] == "stepwise":
            _, key, src, dst = owner
            for pos in self.stepwise[key].delivered(src, dst):
                self.at(self.now + self.alpha, ("advance", key, pos))
            return
        key = owner[1]
        self.flows_left[key] -= 1
        if self.flows_left[key] == 0:
            g, i = self.rendezvous[key][0]
            self.at(self.now + self.alpha_part(key, self.steps[g][i]), ("collected", key))

    def event(self, event: tuple[Any, ...]) -> None:
        if event[0] == "computed":
            _, g, i = event
            self.computing[g] = False
            self.last_compute_end_s = self.now
            self.finish(g, i)
            self.next_compute(g)
        elif event[0] == "arrived":
            key = event[1]
            self.arrived[key] = self.now
            if key in self.receiving:
                self.finish(*self.receiving.pop(key))
        elif event[0] == "advance":
            _, key, pos = event
            self.stepwise_moved(key, self.stepwise[key].advance(pos))
            self.stepwise_check(key, pos)
        else:
            for g, i in self.rendezvous.pop(event[1]):
                self.finish(g, i)

    def rates(self) -> list[float]:
        """Each flow's max-min rate now; during a retune, flows over a dark link carry nothing.
        Rates are kept by the flows' paths for as long as the capacities stand: most rounds end a
        compute, not a flow, and a schedule's layers repeat the same transfers."""
        if not self.flows:
            return []
        capacity = self.model.capacity_bps
        if self.replans is not None and self.replans.dark_capacity_bps is not None:
            capacity = self.replans.dark_capacity_bps
        if capacity is not self._rates_capacity or len(self._rates_memo) >= RATES_MEMO_SIZE:
            self._rates_capacity, self._rates_memo = capacity, {}
        key = tuple(f.resources for _, f, _ in self.flows)
        found = self._rates_memo.get(key)
        if found is None:
            found = self._rates_memo[key] = self._max_min(capacity)
        return found

    def _max_min(self, capacity: dict[Any, float]) -> list[float]:
        if capacity is self.model.capacity_bps:
            return max_min_rates([f for _, f, _ in self.flows], capacity)
        moving = [k for k, (_, f, _) in enumerate(self.flows) if all(capacity.get(r, 0.0) > 0 for r in f.resources)]
        rates = [0.0] * len(self.flows)
        for k, rate in zip(moving, max_min_rates([self.flows[k][1] for k in moving], capacity)):
            rates[k] = rate
        return rates

    def replan(self) -> None:
        """A period's end or a retune's: the controller plans, or the new plan takes over."""
        assert self.replans is not None
        new = self.replans.step(self.now, self.model)
        if new is None:
            return
        self.model = new
        self.plans.append((self.now, new))
        moved = []
        for owner, flow, left in self.flows:
            pair = self.pairs.pop(id(flow))
            flow = Flow(flow.start_s, flow.bytes, new.resources(*pair))
            self.pairs[id(flow)] = pair
            moved.append((owner, flow, left))
        self.flows = moved

    def run(self) -> float:
        for g, gpu in enumerate(self.steps):
            for i in range(len(gpu)):
                if self.waiting[g][i] == 0:
                    self.start(g, i)
        steps, rounds = sum(map(len, self.steps)), 0
        while self.timers or self.flows:
            rounds += 1
            if rounds % PROGRESS_ROUNDS == 0 and progress.active():
                done = sum(map(sum, self.done))
                progress.report(f"{done:,}/{steps:,} steps", done / steps)
            rates = self.rates()
            for (owner, _, _), rate in zip(self.flows, rates):
                if owner[0] == "send":
                    low, high = self.rate_range.get(owner[1:], (math.inf, 0.0))
                    self.rate_range[owner[1:]] = (min(low, rate), max(high, rate))
            ends = [self.now + left / rate for (_, _, left), rate in zip(self.flows, rates) if rate > 0]
            then = min(([self.timers[0][0]] if self.timers else []) + ends, default=math.inf)
            if then == math.inf and self.replans is not None and self.replans.dark_capacity_bps is not None:
                then = self.replans.next_event_s  # every flow waits out a dark window (all links retuned)
            if then == math.inf:
                break
            if self.replans is not None:
                then = min(then, self.replans.next_event_s)
            finished: list[tuple[tuple[Any, ...], Flow, float]] = []
            still: list[tuple[tuple[Any, ...], Flow, float]] = []
            for (owner, flow, left), rate in zip(self.flows, rates):
                left -= rate * (then - self.now)
                if self.replans is not None and rate > 0:
                    self.replans.moved(self.pairs[id(flow)], rate * (then - self.now))
                # done: within a millionth of a bit a byte, or less than the clock can still resolve
                # (at petabit rates late in an iteration, else the loop stalls on rounding)
                done = left <= 1e-6 * max(1.0, flow.bytes) or (rate > 0 and left / rate <= 4 * math.ulp(then))
                (finished if done else still).append((owner, flow, left))
            self.flows, self.now = still, then
            if self.replans is not None and self.now >= self.replans.next_event_s:
                self.replan()
            for owner, flow, _ in finished:
                self.next_on_pair(flow)
                self.flow_done(owner)
            while self.timers and self.timers[0][0] <= self.now:
                self.event(heapq.heappop(self.timers)[2])
        stuck = [(g, i) for g, gpu in enumerate(self.done) for i, done in enumerate(gpu) if not done]
        if stuck:
            g, i = stuck[0]
            raise InputError(f"the schedule deadlocks: GPU {g} step {self.steps[g][i].id} never starts or ends "
                             f"(a receive without its send, or a collective some member never reaches)")
        return self.now


def simulate_schedule(schedule: Schedule, fabric: FabricSection) -> Prediction:
    return simulate_with_message_rates(schedule, fabric)[0]


def simulate_with_message_rates(schedule: Schedule, fabric: FabricSection
                                ) -> tuple[Prediction, dict[tuple[int, int, str], float]]:
    """The schedule's prediction, and each point-to-point message's average rate in the same
    simulation by (sender, receiver, tag): what a message shares its path with (a DAG's concurrent
    transfers) is in it. One simulation for both: at hundreds of GPUs it takes seconds."""
    simulated = simulate_counting_retunes(schedule, fabric)
    return simulated.prediction, simulated.message_bps


@dataclass(frozen=True)
class Simulated:
    prediction: Prediction
    message_bps: dict[tuple[int, int, str], float]
    retunes: int  # re-plans that changed links in every iteration simulated (0 where the fabric does not re-plan)
    gpu_end_s: tuple[float, ...] = ()  # each GPU's last step's end
    plans: tuple[tuple[float, FlowModel], ...] = ()  # the fabric's plans and when each took over


# Iterations simulated at most on a fabric that re-plans: the first from the plan for the whole
# iteration's traffic, then each from the plan the one before left in force, as a run's are.
STEADY_ITERATIONS = 3


def simulate_counting_retunes(schedule: Schedule, fabric: FabricSection, lag_s: float = 0.0,
                              paths: dict[tuple[int, int], tuple[Any, ...]] | None = None) -> Simulated:
    """The schedule simulated once; where the fabric re-plans, each retune goes dark `lag_s` after
    the end of the period it was planned from (the controller's own delay), and the iteration
    predicted is the steady one a run measures after its warm-up: where the first iteration leaves
    another plan in force than it started from (or a retune under way), the next starts from that
    plan with the controller's period grid, measured bytes and retune carried on, and so on until
    one ends on the plan it started from (every next one would run as it did): that one is the
    prediction, or the mean of those after the first where none has by STEADY_ITERATIONS."""
    if schedule.hosts != fabric.hosts:
        raise InputError(f"the schedule has {schedule.hosts} GPUs but fabric.hosts is {fabric.hosts}; "
                         f"they must match")
    dag = _Dag(schedule, fabric, lag_s, paths=paths)
    with progress.part(0.0, 1.0 / STEADY_ITERATIONS, ""):
        total = dag.run()
    first = _outcome(dag, total, steady=False)
    replans = dag.replans
    if replans is None or _settled(dag):
        return first
    outcomes: list[Simulated] = []
    retunes, previous, previous_total = first.retunes, dag, total
    while len(outcomes) + 1 < STEADY_ITERATIONS:
        replans.carry_over(previous_total)
        following = _Dag(schedule, fabric, lag_s, (previous.model, replans))
        with progress.part((len(outcomes) + 1) / STEADY_ITERATIONS, 1.0 / STEADY_ITERATIONS,
                           f"iteration {len(outcomes) + 2}: "):
            following_total = following.run()
        outcomes.append(_outcome(following, following_total, steady=True))
        retunes += replans.retunes
        previous, previous_total = following, following_total
        if _settled(following):
            break
    steady = outcomes[-1] if _settled(previous) or len(outcomes) == 1 else mean_outcome(
        outcomes, f"; the mean of iterations 2-{len(outcomes) + 1}, which did not settle on one plan")
    return replace(steady, retunes=retunes)


def _settled(dag: _Dag) -> bool:
    """The iteration ended on the plan it started from, no retune under way: every next one runs as it did."""
    assert dag.replans is not None  # only fabrics that re-plan carry on
    return dag.replans.pending is None and dag.model.key == dag.plans[0][1].key


def _outcome(dag: _Dag, total: float, steady: bool) -> Simulated:
    """One simulated iteration's prediction (`steady`: one that started where another left off)."""
    busiest = max(dag.compute_s)
    formula = ("schedule simulation: steps when their dependencies are done, one compute at a time per GPU, "
               "transfers and ring collectives as max-min fair flows")
    if any(isinstance(step, CollectiveStep) and step.algorithm == "ina" for gpu in dag.steps for step in gpu):
        formula += ", INA all-reduces as each member's stream through the aggregation node"
    dark = 0.0
    if dag.replans is not None:
        dark = min(dag.replans.dark_total_s, max(0.0, total - busiest))
        formula += (f"; re-planned every {dag.replans.replanner.period_s * 1e6:g} µs as the controller does: "
                    f"{dag.replans.retunes} of {dag.replans.plans} re-plans retuned links, "
                    f"{dag.replans.dark_total_s * 1e3:.3f} ms dark")
        if steady:
            formula += " in the iteration after one that ran, from the plan it left in force"
    exposed = total - dag.last_compute_end_s if busiest > 0 else 0.0
    waiting = _waiting(dag, max(range(len(dag.gpu_end_s)), key=dag.gpu_end_s.__getitem__), total)
    prediction = Prediction(total, Breakdown(compute_s=busiest, communication_s=total - busiest - dark,
                                             reconfiguration_s=dark, exposed_dp_s=exposed, **waiting), formula)
    return Simulated(prediction, dag.message_bps, dag.replans.retunes if dag.replans is not None else 0,
                     tuple(dag.gpu_end_s), tuple(dag.plans))


def mean_outcome(outcomes: Sequence[Simulated], said: str) -> Simulated:
    """Several outcomes of one schedule as one: times, breakdowns, message rates and GPU ends averaged."""
    count = len(outcomes)
    times = [o.prediction.iteration_time_s for o in outcomes]
    parts = [o.prediction.breakdown for o in outcomes]
    breakdown = Breakdown(**{f.name: sum(getattr(b, f.name) for b in parts) / count for f in fields(Breakdown)})
    messages: dict[tuple[int, int, str], list[float]] = {}
    for o in outcomes:
        for key, rate in o.message_bps.items():
            messages.setdefault(key, []).append(rate)
    ends = tuple(sum(e) / count for e in zip(*(o.gpu_end_s for o in outcomes)))
    return Simulated(Prediction(sum(times) / count, breakdown, outcomes[0].prediction.formula + said),
                     {key: sum(rates) / len(rates) for key, rates in messages.items()},
                     max(o.retunes for o in outcomes), ends, outcomes[0].plans)


# What a GPU's idle time is put down to where several of its steps are in progress: the pipeline
# bubble (a receive whose message is not yet sent) first, then the chain of a pass's own steps
# (tensor, pipeline, expert parallelism), then the data-parallel reduction beside them.
WAITING = (("bubble", "bubble_s"), ("tp", "waiting_tp_s"), ("pp", "waiting_pp_s"), ("ep", "waiting_ep_s"),
           ("dp", "waiting_dp_s"))


def _waiting(dag: _Dag, g: int, total: float) -> dict[str, float]:
    """GPU g's time neither computing nor done, by what it waits for: steps whose ids start with
    tp., pp., dp. or ep. (large-model schedules), and receives before their message was sent (the
    bubble; an all-to-all's receive that waits on a busier expert's GPU is expert parallelism's)."""
    labels = dict(WAITING)
    spans: list[tuple[float, float, int]] = []  # (start, end, precedence); computes -1
    for i, step in enumerate(dag.steps[g]):
        start, end = dag.began[g][i], dag.ended[g][i]
        if isinstance(step, ComputeStep):
            spans.append((start, end, -1))
            continue
        label = step.id.split(".", 1)[0]
        if isinstance(step, RecvStep) and label != "ep":  # an expert's receive waits on its peers' load
            sent = dag.send_began.get((step.peer, g, step.tag), start)
            if sent > start:
                spans.append((start, min(sent, end), 0))
                start = min(sent, end)
        if label in labels and end > start:
            spans.append((start, end, [name for name, _ in WAITING].index(label)))
    if not any(p >= 0 for _, _, p in spans):
        return {}
    cuts = sorted({0.0, total, *(t for s in spans for t in s[:2])})
    out = [0.0] * len(WAITING)
    for a, b in zip(cuts, cuts[1:]):
        covering = [p for start, end, p in spans if start <= a and end >= b]
        if covering and min(covering) >= 0:
            out[min(covering)] += b - a
    return {labels[name]: value for (name, _), value in zip(WAITING, out) if value > 0}


def collective_rates_bps(steps: Sequence[Sequence[Step]], model: FlowModel) -> dict[tuple[Any, ...], float]:
    """Per collective `(step id, group)`: the rate of its slowest ring edge when every group that
    runs the same step (the DP groups of all MP ranks) sends to its successor at once, shared
    max-min fairly over the fabric's plan (uplinks, circuits, lightpaths and their relays).
    Groups reaching other replicas (testbed.oracle.replicas) are ring collectives, simulated as
    flows: they need no rate here."""
    concurrent: dict[str, dict[tuple[int, ...], CollectiveStep]] = defaultdict(dict)
    for gpu_steps in steps:
        for step in gpu_steps:
            if isinstance(step, CollectiveStep) and 1 < len(step.group) and max(step.group) < len(steps):
                concurrent[step.id][step.group] = step
    rates: dict[tuple[Any, ...], float] = {}
    for ident, groups in concurrent.items():
        edges = [(group, a, b) for group, step in sorted(groups.items()) for a, b in _edges(model, group, step)]
        shares = max_min_rates([Flow(0.0, 1.0, model.resources(a, b)) for _, a, b in edges], model.capacity_bps)
        for (group, _, _), share in zip(edges, shares):
            rates[(ident, group)] = min(rates.get((ident, group), math.inf), share)
    return rates


def _edges(model: FlowModel, group: tuple[int, ...], step: CollectiveStep) -> list[tuple[int, int]]:
    """The ring of the group where the plan routes it; else (a tree on a circuit plan made for its
    own pairs) the pairs the collective's algorithm actually uses."""
    ring = list(zip(group, group[1:] + group[:1]))
    if model.default is not None or all(pair in model.paths for pair in ring):
        return ring
    return [(group[i], group[j]) for i, j, _ in collective_edges(step.op, step.algorithm, len(group), step.bytes)
            if i != j]

"""How a run is sized for this machine: dilation and byte scale from the schedule, its prediction
and the calibration, and what the monitors judge the run against; the pieces every workload
kind's sizing shares. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from testbed.core.calibration import DEFAULT_CALIBRATION, Calibration
from testbed.core.dilation import MIN_MESSAGE_BYTES, EmulationPlan, message_floor_bytes, resolve_emulation
from testbed.core.fidelity import COUNTER_REFRESHES_PER_PERIOD, DARK_TOLERANCE, SETUP_COUNTER_REFRESH_MS
from testbed.fabrics.all_kinds import KINDS
from testbed.fabrics.ina.node_links import INA_MIN_CHUNKS, ina_workers_per_job, worker_rate_cap_bps
from testbed.fabrics.ina.section import InaFabric
from testbed.fabrics.timing import dark_us, estimate_period_us, route_rto_min_s
from testbed.model.errors import InputError
from testbed.model.fabric_section import FabricSection
from testbed.model.scenario import Scenario
from testbed.model.schedule import CollectiveStep, ComputeStep, Schedule, Step
from testbed.model.units import BITS_PER_BYTE, gbps_to_bps, ms_to_s, transfer_time_s, us_to_s
from testbed.network.collectives import Prediction, collective_cost
from testbed.network.flows import Flow, max_min_rates
from testbed.oracle.fabrics import forwarding_load_factor, mp_flow_model
from testbed.oracle.replanning import replans_during_run
from testbed.oracle.schedule_sim import simulate_schedule
from testbed.shared.ina_rules import PAYLOAD_BYTES
from testbed.workloads.predicted import JobPrediction, Predicted

# A reconfiguration's rule changes and their barrier take about a millisecond here (docs/setup.md), and
# a machine `slowness` times slower takes that many times longer (inside the software-emulated VM
# the hosts switched their links 10-30 ms late); dark time must be accurate to the dark_time
# monitor's DARK_TOLERANCE.
CONTROL_LATENCY_S = 1e-3


@dataclass
class Prepared:
    """Everything decided before any root-only work: the plan's schedule and prediction, and the
    run's sizing; pure, so every command and the tests share it."""

    scenario: Scenario
    schedule: Schedule
    prediction: Prediction
    plan: EmulationPlan
    shortest_event_s: float  # real-world: the shortest message exchange (alpha plus its bytes)
    smallest_message_bytes: float
    expected_rate_bps: float | None = None  # emulated rate a busy transfer should get (None: the host rate)
    # Schedules: the share of B each GPU pair's path carries alone.
    pair_rate_frac: dict[tuple[int, int], float] | None = None
    # DAG schedules: the share of B each message got in the oracle's simulation, by (src, dst, tag)
    message_rate_frac: dict[tuple[int, int, str], float] | None = None
    # Fabrics with an aggregation node: the packet rate this machine's node program answered.
    ina_node_packets_per_s: float | None = None
    # The machine's calibration this run was sized by: the run judges its capacity and stretches
    # its waits for a slow machine by the same figures (one read for the whole run).
    calibration: Calibration = DEFAULT_CALIBRATION
    # The fewest emulated bytes a message may have (INA: enough chunks per pass to stream).
    min_message_bytes: float = MIN_MESSAGE_BYTES
    # Re-planning fabrics: the fastest and slowest outcome over the controller's delays (the
    # prediction is their mean); None where the prediction is one simulation.
    predicted_range_s: tuple[float, float] | None = None
    # Real-world: the longest a host's own messages sent at once take to leave it at B (a scatter's
    # root: (n-1)/n of its buffer); dilated, what its switched route's timeout must outlast.
    host_queue_s: float = 0.0
    # How the results summarise the run: communication as the collectives' own measured times
    # (False: what of the iteration neither compute nor dark time took, as a schedule's
    # prediction counts it), and whether the run's exchanges are judged for stalls.
    communication_from_collectives: bool = False
    stalls_judged: bool = False
    # A collective relayed over circuits or lightpaths of different rates: its steps have no one
    # rate to be judged by (the iteration's time is judged against the simulation).
    step_rates_judged: bool = True
    method: str = ""  # how the prediction was made
    # Several jobs: each one's predicted time together and alone.
    jobs: tuple[JobPrediction, ...] = ()

    def route_rto_min_s(self) -> float:
        """TCP's shortest retransmission timeout on the run's routes, in wall seconds."""
        dilation = self.plan.dilation.dilation
        return route_rto_min_s(self.scenario.fabric, dilation, dilation * self.host_queue_s)

    @property
    def job_predicted_s(self) -> dict[str, float]:
        """Several jobs: each job's predicted iteration beside the others (its GPUs' last step)."""
        return {job.name: job.together_s for job in self.jobs}


def longest_host_queue_s(scenario: Scenario, schedule: Schedule) -> float:
    """The longest a GPU's messages sent at once take to leave it at B (real seconds): a
    collective's longest message (its transfer time over the messages on its critical path: a
    direct scatter's (n-1)/n·M at once, a ring's M/n), or sends posted one after another with
    nothing waited for between them. Summation services (BytePS) are left out: they send a
    chunk at a time."""
    rate = gbps_to_bps(scenario.fabric.gpu_bandwidth_gbps)
    longest = 0.0
    for gpu in schedule.gpus:
        posted = 0.0  # bytes of the sends posted since the GPU last waited
        for step in gpu.steps:
            if step.kind == "send":
                posted += step.message_bytes()
                longest = max(longest, transfer_time_s(posted, rate))
                continue
            posted = 0.0
            if step.kind == "collective":
                coll = step.collective()
                try:
                    cost = collective_cost(coll.op, coll.algorithm, len(coll.group), coll.bytes, rate, 0.0)
                except InputError:
                    continue
                longest = max(longest, cost.time_s / max(1, cost.messages))
    return longest


def finish(prepared: Prepared, predicted: Predicted, calibration: Calibration) -> Prepared:
    """A kind's sizing with what every run shares: what the prediction says beside its figure (its
    method, range and jobs), the calibration it was sized by, the message floor and how long a
    host's own messages queue."""
    floor = _message_floor(prepared.scenario, prepared.smallest_message_bytes, prepared.min_message_bytes)
    return replace(prepared, calibration=calibration, min_message_bytes=floor,
                   host_queue_s=longest_host_queue_s(prepared.scenario, prepared.schedule),
                   method=predicted.method, predicted_range_s=predicted.predicted_range_s, jobs=predicted.jobs)


def _message_floor(scenario: Scenario, smallest_message_bytes: float, floor_bytes: float) -> float:
    fabric = scenario.fabric
    transfer_s = transfer_time_s(smallest_message_bytes, gbps_to_bps(fabric.gpu_bandwidth_gbps))
    return message_floor_bytes(us_to_s(fabric.latency_us), transfer_s, floor_bytes)


# A collective whose messages take less than this share of α on the wire (a barrier's token) is
# all latency: how many bytes it carries says nothing of the link, so it does not size them.
NEGLIGIBLE_TRANSFER = 0.01


def size_schedule(predicted: Predicted, calibration: Calibration, collective_messages: bool = True) -> Prepared:
    """A schedule predicted by simulating the same steps the agents will replay (placed models,
    traces, several jobs); `collective_messages`: whether its collectives' messages size the run
    (a placed model's are DP buckets, its sends are what the sizing must protect).

    A schedule has hundreds of short steps per GPU, so per-step host overhead is judged against
    the average step (overheads add up along the critical path) rather than the shortest one, and
    messages by the smallest of those that carry most of the bytes."""
    scenario, schedule, prediction = predicted.scenario, predicted.schedule, predicted.prediction
    per_gpu = [_gpu_messages(scenario, gpu.steps, collective_messages) for gpu in schedule.gpus]
    steps = max(timed for _, timed in per_gpu)
    sizes = sorted(size for gpu_sizes, _ in per_gpu for size in gpu_sizes)
    average_step = prediction.iteration_time_s / max(1, steps)
    # Without point-to-point messages, judge against what a link carries in an average step.
    median = float(sizes[len(sizes) // 2]) if sizes else \
        max(1.0, average_step * gbps_to_bps(scenario.fabric.gpu_bandwidth_gbps) / BITS_PER_BYTE)
    # Size the bytes by the messages the message-size monitor judges (those carrying most bytes).
    bulk = _bulk_smallest(sizes, median)
    cap: float | None = None
    node_rate: float | None = None
    floor = float(MIN_MESSAGE_BYTES)
    if KINDS[scenario.fabric.kind].aggregation_node:
        node_rate = calibration.node_packets_per_s
        fabric = scenario.fabric
        assert isinstance(fabric, InaFabric), "an aggregation node's fabric is an ina fabric"
        cap = worker_rate_cap_bps(fabric, ina_workers_per_job(schedule, fabric), node_rate)
        floor = _ina_floor_bytes(schedule, bulk)
    plan = emulation_plan(scenario, schedule, prediction, calibration, average_step, bulk, cap,
                          warmup_iteration_s=_warmup_iteration_s(scenario, schedule, prediction),
                          min_message_bytes=floor)
    return Prepared(scenario, schedule, prediction, plan, average_step, bulk,
                    pair_rate_frac=_pair_rate_fractions(scenario, schedule),
                    message_rate_frac=_message_rate_fractions(scenario, schedule, predicted.message_bps),
                    ina_node_packets_per_s=node_rate, min_message_bytes=floor)


def _ina_floor_bytes(schedule: Schedule, bulk_bytes: float) -> float:
    """The floor on the bulk messages that keeps every INA all-reduce at INA_MIN_CHUNKS emulated
    chunks or more (the byte scale is one for all messages, so the smallest INA buffer decides)."""
    smallest = min((step.bytes for gpu in schedule.gpus for step in gpu.steps
                    if isinstance(step, CollectiveStep) and step.algorithm == "ina"), default=None)
    if smallest is None:
        return MIN_MESSAGE_BYTES
    return max(MIN_MESSAGE_BYTES, INA_MIN_CHUNKS * PAYLOAD_BYTES * bulk_bytes / smallest)


def _gpu_messages(scenario: Scenario, steps: Sequence[Step], collective_messages: bool) -> tuple[list[int], int]:
    """The messages one GPU sends and how many timed events it runs: its sends, receives and
    computes, and in an imported trace each collective's messages (a ring all-reduce of M among n
    sends 2(n-1) of M/n, each a step of its own), not one event of its whole buffer. A placed
    model's collectives are DP buckets of at least 25 MB (fused further where that finishes
    sooner): its sends are what the sizing must protect."""
    sizes, timed = [], 0
    rate, alpha = gbps_to_bps(scenario.fabric.gpu_bandwidth_gbps), us_to_s(scenario.fabric.latency_us)
    for step in steps:
        timed += 1
        if step.kind == "send":
            sizes.append(step.message_bytes())
        elif step.kind == "collective" and collective_messages:
            coll = step.collective()
            try:
                cost = collective_cost(coll.op, coll.algorithm, len(coll.group), coll.bytes, rate, alpha)
            except InputError:  # summation services and INA: their chunks are sized apart
                continue
            timed += max(1, cost.messages) - 1
            if transfer_time_s(cost.smallest_message_bytes, rate) >= NEGLIGIBLE_TRANSFER * alpha:
                sizes += [max(1, int(cost.smallest_message_bytes))] * max(1, cost.messages)
    return sizes, timed


BULK_SHARE = 0.9  # the message-size monitor judges the messages that carry this share of the bytes


def _bulk_smallest(sizes: list[int], default: float) -> float:
    """The smallest of the messages that carry BULK_SHARE of a schedule's bytes: a few tiny
    messages (biases, small activations) take α, not bandwidth, and distort little when scaled."""
    if not sizes:
        return default
    ignorable, skipped = (1 - BULK_SHARE) * sum(sizes), 0
    for size in sizes:  # ascending
        if skipped + size > ignorable:
            return size
        skipped += size
    return sizes[-1]


def _message_rate_fractions(scenario: Scenario, schedule: Schedule,
                            message_bps: dict[tuple[int, int, str], float]) -> dict[tuple[int, int, str], float] | None:
    """A DAG's messages, each against the rate it got in the oracle's simulation; where the
    controller re-plans paths during the run, no static model says what one message gets, so
    they are left unjudged (an empty map; the iteration times and dark times judge the run)."""
    if schedule.execution != "dag":
        return None
    if replans_during_run(scenario.fabric):
        return {}
    rate = gbps_to_bps(scenario.fabric.gpu_bandwidth_gbps)
    return {key: bps / rate for key, bps in message_bps.items()}


def _pair_rate_fractions(scenario: Scenario, schedule: Schedule) -> dict[tuple[int, int], float]:
    """Per GPU pair with traffic, its path's bottleneck capacity over B in the oracle's plan."""
    traffic = schedule.traffic()
    try:
        model = mp_flow_model(scenario.fabric, schedule.hosts, 1, traffic)
    except ValueError:
        return {}
    rate = gbps_to_bps(scenario.fabric.gpu_bandwidth_gbps)
    fractions = {}
    for pair in traffic:
        try:
            fractions[pair] = min(model.capacity_bps[r] for r in model.resources(*pair)) / rate
        except (KeyError, ValueError):
            continue
    if scenario.jobs:
        # Several jobs: a pair shares its path with the other jobs' pairs, all moving at once (two
        # rings interleaved on a cluster's servers get half an uplink each).
        pairs = sorted(fractions)
        shared = max_min_rates([Flow(0.0, 1.0, tuple(model.resources(*p))) for p in pairs], model.capacity_bps)
        fractions = {p: min(fractions[p], bps / rate) for p, bps in zip(pairs, shared)}
    return fractions


def emulation_plan(scenario: Scenario, schedule: Schedule, prediction: Prediction, calibration: Calibration,
                   shortest_event_s: float, smallest_message_bytes: float,
                   max_host_rate_bps: float | None = None,
                   warmup_iteration_s: float | None = None, exact_packets: bool = False,
                   min_message_bytes: float = MIN_MESSAGE_BYTES, buffer_bytes: float = 0.0) -> EmulationPlan:
    """Dilation and byte scale for this schedule: every rank (GPUs and CPU machines) may send at
    once, relaying fabrics forward some packets several times; `buffer_bytes`: the largest buffer
    a rank holds where it is larger than any step's bytes (a collective's whole data)."""
    return resolve_emulation(
        scenario,
        predicted_iteration_s=prediction.iteration_time_s,
        warmup_iteration_s=warmup_iteration_s,
        shortest_event_s=shortest_event_s,
        smallest_message_bytes=smallest_message_bytes,
        concurrent_senders=schedule.hosts * _load_factor(scenario, schedule),
        calibration=calibration,
        min_dilation=min_dilation_for(scenario.fabric, calibration.slowness),
        max_host_rate_bps=max_host_rate_bps,
        buffer_bytes=schedule.hosts * _largest_buffer_bytes(schedule, buffer_bytes),
        exact_packets=exact_packets,
        min_message_bytes=_message_floor(scenario, smallest_message_bytes, min_message_bytes),
    )


def _largest_buffer_bytes(schedule: Schedule, buffer_bytes: float) -> float:
    """The largest buffer one rank holds: a collective's data, else the schedule's largest step."""
    sizes = [float(step.bytes) for gpu in schedule.gpus for step in gpu.steps if not isinstance(step, ComputeStep)]
    return max([buffer_bytes, *sizes])


def _warmup_iteration_s(scenario: Scenario, schedule: Schedule, prediction: Prediction) -> float:
    """A warm-up round runs the messages and collectives but not the compute (the agents skip
    it): the same schedule simulated without its compute steps."""
    idle = replace(schedule, gpus=tuple(replace(gpu, steps=tuple(replace(step, compute_us=0.0)
                                                                  if isinstance(step, ComputeStep) else step
                                                                  for step in gpu.steps))
                                        for gpu in schedule.gpus))
    return min(prediction.iteration_time_s, simulate_schedule(idle, scenario.fabric).iteration_time_s)


def _load_factor(scenario: Scenario, schedule: Schedule) -> float:
    """Relaying fabrics forward packets several times: leave the machine capacity for that."""
    return forwarding_load_factor(scenario.fabric, schedule.traffic())


def min_dilation_for(fabric: FabricSection, slowness: float = 1.0) -> float:
    """Optical fabrics: the dilated dark time must dwarf the controller's and hosts' own latency,
    and where the controller re-plans, an estimation period must last enough counter refreshes."""
    dark = dark_us(fabric)
    if not KINDS[fabric.kind].reconfigurable:
        return 0.0
    for_dark = CONTROL_LATENCY_S * slowness / DARK_TOLERANCE / us_to_s(dark) if dark > 0 else 0.0
    if not replans_during_run(fabric):
        return for_dark
    refreshes_s = ms_to_s(SETUP_COUNTER_REFRESH_MS) * COUNTER_REFRESHES_PER_PERIOD
    return max(for_dark, refreshes_s / us_to_s(estimate_period_us(fabric)))

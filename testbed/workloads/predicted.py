"""What a workload kind's prediction gives every command: the schedule, the one predicted iteration
a run is judged against, how it was made, and what a run's monitors and jobs read of it."""

from __future__ import annotations

from dataclasses import dataclass, field

from testbed.model.scenario import Scenario
from testbed.model.schedule import Schedule
from testbed.network.collectives import Prediction
from testbed.workloads.traffic import TrafficBytes


@dataclass(frozen=True)
class GpuMemory:
    """What one GPU of the heaviest stage holds, in bytes, against what the device has."""

    stage: int
    weights: float
    gradients: float
    optimizer: float
    activations: float
    device: float

    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations

    def describe(self) -> str:
        parts = (("weights", self.weights), ("gradients", self.gradients), ("optimizer", self.optimizer),
                 ("activations", self.activations))
        return ", ".join(f"{name} {value / 1e9:.1f}" for name, value in parts)

    def to_json(self) -> dict[str, float]:
        return {"stage": self.stage, "weights_bytes": self.weights, "gradients_bytes": self.gradients,
                "optimizer_bytes": self.optimizer, "activations_bytes": self.activations,
                "total_bytes": self.total(), "device_bytes": self.device}


@dataclass(frozen=True)
class JobPrediction:
    name: str
    gpus: tuple[int, ...]
    together_s: float  # the job's iteration beside the others (its GPUs' last step)
    alone_s: float  # the same schedule with the other jobs' GPUs idle


@dataclass(frozen=True)
class Predicted:
    """A workload's schedule and the one prediction every command reports and a run is judged against."""

    scenario: Scenario  # as predicted: on re-planning fabrics, with the retune rule the prediction chose
    schedule: Schedule
    prediction: Prediction
    method: str  # how the figure was made ("closed form", "step-by-step simulation", ...)
    # DAG schedules: the rate each message got in the simulation, by (src, dst, tag)
    message_bps: dict[tuple[int, int, str], float] = field(default_factory=dict)
    gpu_end_s: tuple[float, ...] = ()  # each GPU's last step's end in the simulation
    # Re-planning fabrics: the fastest and slowest outcome over the controller's delays (the
    # prediction is their mean); None where the prediction is one computation.
    predicted_range_s: tuple[float, float] | None = None
    jobs: tuple[JobPrediction, ...] = ()  # several jobs: each one's time together and alone
    traffic_bytes: TrafficBytes | None = None  # the bytes on the wire in one iteration (large models)
    gpu_memory: GpuMemory | None = None  # the heaviest GPU's memory (large models)

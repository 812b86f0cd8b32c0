"""The scenario file's strict pydantic models of its emulation and faults, and the scenario generic
in its fabric and workload sections (each kind's own: testbed/fabrics/<kind>/section.py and
testbed/workloads/<kind>/section.py; the loader that knows them all is testbed.planning.scenario_file)."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar, Union

from pydantic import Field, ValidationInfo, field_validator, model_validator

from testbed.model.fabric_section import FabricSection, Strict
from testbed.model.limits import MAX_DILATION, MAX_HOSTS, MAX_WALL_S, WORKLOAD_MAX_HOSTS
from testbed.model.workload_section import WorkloadSection


class Emulation(Strict):
    # how many times slower than real time the run goes, so this machine can forward its rates;
    # auto: from the calibration, the fabric's rates and max_wall_s
    dilation: Union[Literal["auto"], float] = "auto"
    # the share of every message's bytes actually sent (times stay real-world); auto: 1, or more
    # where messages would be too small to time
    byte_scale: Union[Literal["auto"], float] = "auto"
    # Wall time the user allows for the measured iterations; `auto` sizes the run to fit it.
    max_wall_s: float = Field(default=60.0, gt=0, le=MAX_WALL_S)
    # Unmeasured iterations first: TCP windows open and buffers fault in before timing starts.
    # Unset: 2 for collectives (all-to-all and send/recv use each connection once an iteration,
    # and its window is still opening in the second), 1 for placed models (long iterations that
    # reuse every connection many times).
    warmup_iterations: int | None = Field(default=None, ge=0, le=100)
    # Fraction of the calibrated forwarding capacity that `auto` lets the run use.
    capacity_fraction: float = Field(default=0.6, gt=0, le=1)

    @field_validator("dilation", "byte_scale", mode="before")
    @classmethod
    def _auto_or_positive(cls, value: Any, info: ValidationInfo) -> Any:
        if value == "auto":
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_DILATION:
            raise ValueError(f"'{info.field_name}' must be 'auto' or a number greater than 0 and at most "
                             f"{MAX_DILATION:.0e} (got {str(value)[:40]})")
        return float(value)


FaultKind = Literal["link_loss", "link_down", "agent_kill", "controller_restart", "node_restart"]
HOST_FAULTS = ("link_loss", "link_down", "agent_kill")


class Fault(Strict):
    """One injected fault, timed in real-world milliseconds after the host agents start (warm-up
    iterations included). link_loss and link_down last `duration_ms` (unset: the rest of the run)."""

    kind: FaultKind  # what fails (docs/faults.md)
    # when, in real-world ms after every host agent connected (warm-ups included)
    at_ms: float = Field(ge=0, le=MAX_WALL_S * 1e3)
    host: int | None = Field(default=None, ge=0, le=MAX_HOSTS)  # link_loss, link_down, agent_kill: whose link or agent
    loss_frac: float | None = Field(default=None, gt=0, lt=1)  # link_loss: the share of packets lost
    # link_loss, link_down: how long (unset: the rest of the run)
    duration_ms: float | None = Field(default=None, gt=0, le=MAX_WALL_S * 1e3)

    @model_validator(mode="after")
    def _fields_of_kind(self) -> "Fault":
        if (self.host is None) == (self.kind in HOST_FAULTS):
            raise ValueError(f"fault {self.kind} " + ("needs 'host' (a GPU rank)" if self.host is None
                                                        else "takes no 'host'"))
        if (self.loss_frac is None) == (self.kind == "link_loss"):
            raise ValueError(f"fault {self.kind} " + ("needs 'loss_frac'" if self.loss_frac is None
                                                        else "takes no 'loss_frac'"))
        if self.duration_ms is not None and self.kind not in ("link_loss", "link_down"):
            raise ValueError(f"fault {self.kind} takes no 'duration_ms' (it happens once)")
        return self


F = TypeVar("F", bound=FabricSection, covariant=True)
W = TypeVar("W", bound=WorkloadSection, covariant=True)


class JobOf(Strict, Generic[W]):
    """One training job of several on the fabric: its GPUs (a count, taken in order from those the
    jobs before it left, or host indices) and its workload."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")  # names the job in predictions and results
    # a count, taken in order from the GPUs the jobs before it left, or a list of host indices
    gpus: int | list[int]
    workload: W  # any workload but jobs (a `workload` section)

    @model_validator(mode="after")
    def _one_job(self) -> "JobOf[W]":
        refusal = self.workload.job_refusal()
        if refusal is not None:
            raise ValueError(refusal)
        if isinstance(self.gpus, int) and self.gpus < 1:
            raise ValueError("gpus must be a positive count or a list of host indices")
        return self


class ScenarioOf(Strict, Generic[F, W]):
    """A scenario file. Its `fabric` and `workload` are one kind's section each:
    testbed.planning.scenario_file parses a file into ScenarioOf[AnyFabric, AnyWorkload], the
    discriminated unions of every registered kind's section."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # names runs and reports
    seed: int = 0  # of the gradients' data and every random choice, so a run can be repeated
    fabric: F  # the interconnect: one kind's section (`fabric`, below)
    workload: W  # what trains on it (`workload`, below)
    jobs: list[JobOf[W]] | None = None  # several jobs on one fabric, instead of `workload` (below)
    # several jobs on SiP-OCS or SiP-Ring: shared (the controller plans circuits or wavelengths for
    # every job's traffic at once) or partitioned (each job has a fixed share, in proportion to its
    # GPUs, of the OCS switches or the wavelengths, planned from its own traffic alone)
    job_sharing: Literal["shared", "partitioned"] = "shared"
    emulation: Emulation = Emulation()  # how the run is fitted to this machine (below)
    faults: list[Fault] = Field(default_factory=list)  # injected during the run (below)

    @model_validator(mode="before")
    @classmethod
    def _jobs_are_the_workload(cls, data: Any) -> Any:
        """`jobs:` replaces `workload:`; inside, the workload is of kind jobs, iterating as the job
        that asks most."""
        if not isinstance(data, dict) or data.get("jobs") is None:
            return data
        if data.get("workload") not in (None, {"kind": "jobs"}) and not (
                isinstance(data.get("workload"), dict) and data["workload"].get("kind") == "jobs"):
            raise ValueError("give either workload (one job) or jobs (several), not both")
        jobs = data["jobs"]
        if not isinstance(jobs, list) or not jobs:
            raise ValueError("jobs must be a non-empty list of {name, gpus, workload}")
        iterations = [j.get("workload", {}).get("iterations", 3) for j in jobs
                      if isinstance(j, dict) and isinstance(j.get("workload"), dict)]
        return {**data, "workload": {"kind": "jobs", "iterations": max(iterations, default=3)}}

    def job_gpus(self) -> list[tuple[JobOf[W], list[int]]]:
        """Each job with its host indices: a count takes the lowest hosts the jobs before it left."""
        taken: set[int] = set()
        out = []
        lowest = 0  # every host below it is taken: counts take hosts upward from here (linear in all)
        for job in self.jobs or []:
            if isinstance(job.gpus, int):
                gpus: list[int] = []
                host = lowest
                while len(gpus) < job.gpus and host < self.fabric.hosts:
                    if host not in taken:
                        gpus.append(host)
                    host += 1
            else:
                gpus = list(job.gpus)
            taken |= set(gpus)
            while lowest in taken:
                lowest += 1
            out.append((job, gpus))
        return out

    def paced_groups(self, hosts: int) -> list[tuple[list[int], int]]:
        """Each job's hosts and measured iterations, for agents that keep each job's own pace; a host
        no job uses (of `hosts` ranks) is a group of its own (it has no steps). Empty for one job."""
        if not self.jobs:
            return []
        groups = [(list(gpus), job.workload.iterations) for job, gpus in self.job_gpus()]
        used = {g for gpus, _ in groups for g in gpus}
        return groups + [([h], 1) for h in range(hosts) if h not in used]

    def warmups(self) -> int:
        """Unmeasured iterations before the measured ones (emulation.warmup_iterations, resolved)."""
        if self.emulation.warmup_iterations is not None:
            return self.emulation.warmup_iterations
        workloads = [job.workload for job in self.jobs or []] or [self.workload]
        return min(w.default_warmups for w in workloads)

    def loses_packets(self) -> bool:
        """Whether packets are lost on purpose, by the fabric or by an injected fault."""
        return self.fabric.loses_packets() or any(fault.loss_frac for fault in self.faults)

    def _jobs_fit(self) -> None:
        if self.job_sharing == "partitioned" and not self.jobs:
            raise ValueError("job_sharing: partitioned shares a fabric among jobs: write the workload as jobs: "
                             "or leave job_sharing out")
        if self.jobs is None:
            return
        names = [job.name for job in self.jobs]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"jobs: two jobs are named {twice!r}; name each job once")
        owner: dict[int, str] = {}
        for job in self.jobs:
            if isinstance(job.gpus, int):
                left = self.fabric.hosts - len(owner)
                if job.gpus > left:
                    raise ValueError(f"jobs: job {job.name!r} asks for {job.gpus} GPUs but only {left} of "
                                     f"fabric.hosts ({self.fabric.hosts}) are left by the jobs before it")
                gpus = [h for h in range(self.fabric.hosts) if h not in owner][:job.gpus]
            else:
                gpus = job.gpus
                if not gpus or len(set(gpus)) != len(gpus) or any(not 0 <= g < self.fabric.hosts for g in gpus):
                    raise ValueError(f"jobs: job {job.name!r} must list distinct hosts in "
                                     f"0..{self.fabric.hosts - 1} (got {gpus})")
            for g in gpus:
                if g in owner:
                    raise ValueError(f"jobs: jobs {owner[g]!r} and {job.name!r} both use GPU {g}; "
                                     f"give each GPU to one job")
                owner[g] = job.name
            try:
                job.workload.fits(len(gpus), f"its {len(gpus)} GPUs")
            except ValueError as error:
                raise ValueError(f"jobs: job {job.name!r}: {error}") from None

    @model_validator(mode="after")
    def _sizes_agree(self) -> "ScenarioOf[F, W]":
        if self.jobs and self.fabric.hosts > WORKLOAD_MAX_HOSTS:
            raise ValueError(f"jobs: a fabric shared by jobs predicts at most {WORKLOAD_MAX_HOSTS:,} GPUs, not "
                             f"fabric.hosts ({self.fabric.hosts:,})")
        self._jobs_fit()
        if not self.jobs:
            self.workload.fits(self.fabric.hosts, f"fabric.hosts ({self.fabric.hosts})")
        for index, fault in enumerate(self.faults):
            if fault.host is not None and fault.host >= self.fabric.hosts:
                raise ValueError(f"faults[{index}]: host {fault.host} does not exist "
                                 f"(ranks 0..{self.fabric.hosts - 1})")
            node = self.fabric.spec.aggregation_node
            if fault.kind == "node_restart" and not node:
                raise ValueError(f"faults[{index}]: node_restart needs an aggregation node (fabric.kind ina)")
            if fault.kind == "controller_restart" and node:
                raise ValueError(f"faults[{index}]: an ina fabric has no controller to restart")
        return self


# What the pure layers and the emulation take: a scenario with any kinds' sections.
Scenario = ScenarioOf[FabricSection, WorkloadSection]
Job = JobOf[WorkloadSection]

"""Pipeline stage 2, match-action tables programmed by the control plane: job → workers (their
addresses, which form the job's multicast group), slot range and fallback host. Unknown jobs,
workers sending from another address and slots outside the job's range are dropped. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from hosts.ina.parser import Drop, Header
from testbed.model.limits import INA_MAX_WORKERS as MAX_WORKERS

SHARING_MODES = ("reserved", "shared")


class RegistrationError(ValueError):
    """A control-plane request the node refuses (the message says why)."""


@dataclass(frozen=True)
class JobEntry:
    job: int
    workers: tuple[str, ...]  # worker id → address; also the multicast group of results
    slot_base: int
    slot_count: int
    sharing: str
    fallback: str  # address of the job's end-host aggregator (shared slots)

    @property
    def all_bits(self) -> int:
        return (1 << len(self.workers)) - 1


class Tables:
    """Jobs by id. Reserved sharing gives each job its own contiguous range of the pool (SwitchML);
    shared sharing lets every job hash over the whole pool (ATP)."""

    def __init__(self, pool_slots: int, sharing: str) -> None:
        if sharing not in SHARING_MODES:
            raise ValueError(f"sharing must be one of {SHARING_MODES}, not {sharing!r}")
        self.pool_slots = pool_slots
        self.sharing = sharing
        self.jobs: dict[int, JobEntry] = {}

    def register(self, job: int, workers: list[str], window: int) -> JobEntry:
        """Idempotent for the same request (every worker of a job registers); a job id already
        programmed with other workers, or a window the pool cannot hold, is refused."""
        workers_t = tuple(workers)
        if not 1 <= len(workers_t) <= MAX_WORKERS:
            raise RegistrationError(f"job {job}: a job has 1 to {MAX_WORKERS} workers, not {len(workers_t)}")
        if not 0 <= job < 1 << 16:
            raise RegistrationError(f"job id {job} is outside 0..65535")
        if window < 1:
            raise RegistrationError(f"job {job}: window must be at least 1 slot")
        existing = self.jobs.get(job)
        if existing is not None:
            if existing.workers != workers_t:
                raise RegistrationError(f"job {job} is already registered with other workers")
            return existing
        if self.sharing == "shared":
            entry = JobEntry(job, workers_t, 0, self.pool_slots, "shared", workers_t[0])
        else:
            base = self._free_range(window)
            if base is None:
                free = self.pool_slots - sum(e.slot_count for e in self.jobs.values())
                raise RegistrationError(f"job {job}: the node's pool has {free} free slots, the job asks for "
                                        f"{window}; raise fabric.slots or lower the jobs' windows")
            entry = JobEntry(job, workers_t, base, window, "reserved", workers_t[0])
        self.jobs[job] = entry
        return entry

    def _free_range(self, size: int) -> int | None:
        taken = sorted((e.slot_base, e.slot_base + e.slot_count) for e in self.jobs.values())
        start = 0
        for lo, hi in taken:
            if lo - start >= size:
                return start
            start = max(start, hi)
        return start if self.pool_slots - start >= size else None

    def match(self, header: Header, source: str) -> JobEntry:
        entry = self.jobs.get(header.job)
        if entry is None:
            raise Drop("unknown_job")
        if header.worker >= len(entry.workers) or entry.workers[header.worker] != source:
            raise Drop("unknown_worker")
        if not entry.slot_base <= header.slot < entry.slot_base + entry.slot_count:
            raise Drop("slot_out_of_range")
        return entry

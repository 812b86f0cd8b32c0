"""The `model` workload's scenario section: a model SiP-ML's placer splits over the GPUs."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from testbed.model.fabric_section import Strict
from testbed.model.limits import MAX_COLLECTIVE_BYTES, MAX_COMPUTE_US, MAX_GLOBAL_BATCH, MAX_HOSTS
from testbed.model.workload_section import WorkloadSection


class PlacedModel(Strict):
    """`workload.model`: what the placer splits, how, and on which device."""

    name: str  # resnet50 | transformer | megatron, or the name given in `profile`
    global_batch: int = Field(ge=1, le=MAX_GLOBAL_BATCH)  # samples per iteration over all DP groups (B)
    mp: int = Field(default=1, ge=1, le=MAX_HOSTS)  # GPUs a model-parallel group splits each op over (k)
    dp: int = Field(default=1, ge=1, le=MAX_HOSTS)  # data-parallel groups (l): the job takes mp·dp GPUs
    degree: int | None = Field(default=None, ge=1, le=MAX_HOSTS)  # default: the fabric's (Q for sip-ocs)
    device: str = "v100"  # the GPU whose compute profile times the ops: v100, a100 or h100
    # constant: every op at the device's large-GEMM throughput; waves: a GEMM piece too small to
    # fill the GPU's multiprocessors with output tiles gets less (testbed/placer/profiles.py);
    # paper: SiP-ML §4.2's model: waves over the sample dimension at the local batch, and a split
    # of the model along any other dimension divides that time linearly
    efficiency: Literal["constant", "waves", "paper"] = "constant"
    profile: str | None = None  # a user op profile (YAML/JSON) instead of the zoo model
    # SiP-ML's balance target: an op is split into parts of about this much compute (fewer where
    # the degree or the op's size caps them)
    tau_us: float = Field(default=10.0, gt=0, le=MAX_COMPUTE_US)
    # DP all-reduce in buckets of this many bytes, each started as the backward compute fills it
    # (PyTorch DDP's 25 MB); 0: one all-reduce after the whole backward pass
    dp_bucket_bytes: int = Field(default=25_000_000, ge=0, le=MAX_COLLECTIVE_BYTES)
    # Convolutions may be cut by rows (a spatial split) where that moves fewer bytes than a channel
    # split; false: channel splits only
    spatial_splits: bool = True
    # What the DP all-reduce moves per parameter: fp16 (mixed precision's gradients, 2 bytes) or
    # fp32 (4 bytes: twice the model's fp16 parameter bytes)
    gradient_precision: Literal["fp16", "fp32"] = "fp16"
    # true: a weighted op after a channel-cut one is cut by input channel (Megatron's column/row
    # pairs: its output is partial sums, nothing is gathered); false: every weighted op is cut by
    # output channel and needs its whole input (SiP-ML §3.2's split, a broadcast pattern)
    split_pairing: bool = True


class ModelWorkload(WorkloadSection):
    description: ClassVar[str] = "a model SiP-ML's degree-aware placer splits over the GPUs (`workload.model`, below)"
    kind: Literal["model"]
    model: PlacedModel  # what SiP-ML's placer splits over the GPUs (below)

    # long iterations reuse every connection many times: one unmeasured iteration is enough
    default_warmups: ClassVar[int] = 1
    max_hosts: ClassVar[int] = MAX_HOSTS  # one replica simulated for all, or the placer's estimate

    def fits(self, hosts: int, whose: str) -> None:
        super().fits(hosts, whose)
        mp, dp = self.model.mp, self.model.dp
        if mp * dp != hosts:
            raise ValueError(f"workload.model mp×dp = {mp}×{dp} = {mp * dp} must equal {whose}")

    def describe(self) -> str:
        return f"model {self.model.name} (mp {self.model.mp} × dp {self.model.dp})"

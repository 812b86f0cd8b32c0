"""How the placer cuts a model and what its DP all-reduce moves (a model section chooses them:
testbed.workloads.model.plan.plan_settings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from testbed.placer.buckets import DEFAULT_BUCKET_BYTES

GradientPrecision = Literal["fp16", "fp32"]


@dataclass(frozen=True)
class PlanSettings:
    # DP all-reduce in buckets of this many bytes beside the backward pass (0: after it)
    bucket_bytes: float = DEFAULT_BUCKET_BYTES
    spatial: bool = True  # convolutions may be cut by rows where that moves fewer bytes
    # True: a weighted op fed by a channel-cut op is cut by input channel (Megatron's column/row
    # pairs: partial sums out, no gather); False: every weighted op is cut by output channel and
    # needs a copy of its whole input (SiP-ML §3.2's broadcast pattern)
    pairing: bool = True
    gradient_precision: GradientPrecision = "fp16"  # what the DP all-reduce moves per parameter

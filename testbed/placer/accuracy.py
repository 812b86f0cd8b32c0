"""Training iterations needed to reach target accuracy, as a function of the global batch (data).

ResNet-50 and the Transformer follow the shape Shallue et al. measured ("Measuring the Effects of
Data Parallelism on Neural Network Training", JMLR 2019): steps fall in proportion to the batch up
to a critical batch, then flatten. We use the two-regime form of McCandlish et al. ("An Empirical
Model of Large-Batch Training", 2018), steps(b) = S_min · (1 + B_noise / b). In that form the knee,
where doubling the batch stops halving the steps (steps = 2 · S_min), is at b = B_noise, so B_noise
is set to the knee read off each curve (Shallue et al. Fig. 1, the ResNet-50/ImageNet and
Transformer/LM1B panels): near 65,536 for ResNet-50, whose steps still fall almost in proportion at
8,192, and near 2,048 for the Transformer. S_min sets the scale: ResNet-50 takes ~90 epochs of
1.28 M images at batch 8,192 (Goyal et al. 2017); the Transformer's S_min (2,000) only scales its
times, never which plan wins. These approximate the published curves; they are
not digitised data, which is why the sweep's sensitivity table varies B_noise. Megatron is fixed at
batch 1,024 and 240,000 iterations, as SiP-ML uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from testbed.model.errors import InputError


@dataclass(frozen=True)
class AccuracyCurve:
    model: str
    min_steps: float
    noise_batch: float
    batches: tuple[int, ...]  # global batches the search tries
    source: str
    fixed: tuple[int, int] | None = None  # (batch, iterations) when only one point is known

    def iterations(self, global_batch: int) -> float:
        if self.fixed is not None:
            batch, steps = self.fixed
            if global_batch != batch:
                raise InputError(f"{self.model} is only characterised at batch {batch}")
            return float(steps)
        return self.min_steps * (1 + self.noise_batch / global_batch)


CURVES = {
    "resnet50": AccuracyCurve("resnet50", 1556.0, 65536.0, (2048, 8192, 32768, 65536),
                              "Shallue et al. 2019 (ResNet-50, ImageNet), McCandlish et al. 2018 form"),
    "transformer": AccuracyCurve("transformer", 2000.0, 2048.0, (1024, 2048, 4096, 16384),
                                 "Shallue et al. 2019 (Transformer, LM1B), McCandlish et al. 2018 form"),
    "megatron": AccuracyCurve("megatron", 0, 0, (1024,), "SiP-ML §4.1 after Megatron-LM: batch 1024, 240k iterations",
                              fixed=(1024, 240_000)),
}


def curve(model: str) -> AccuracyCurve:
    try:
        return CURVES[model]
    except KeyError:
        raise InputError(f"no iterations-to-accuracy data for model '{model}'; known: {', '.join(CURVES)}") from None

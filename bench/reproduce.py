"""The reproduction suite: each claim of the source documents tested at emulation scale on this machine (real
runs, emulated beside predicted) and with the oracle at paper scale, beside the paper's figure.

Run as root: `.venv/bin/python bench/reproduce.py` (about 10 minutes; `--page-only` rebuilds the
page from the last results). Writes bench/results/reproduce.json and docs/reproduction.md. The
paper-scale SiP-ML verdicts come from bench/results/placer_sweep_paper.json (`bench/placer_sweep.py
--setup paper`, no root), the table of the paper's setup beside ours from it and
bench/results/placer_sweep.json; the verdict rule and the paper's figures are bench/verdict_rule.py.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from claims_report import POINT_CLAIMS, claims_summary, point_claims
from replan_tables import replan_tables
from verdict_rule import (
    PaperFigure,
    byteps_over_ring_bytes,
    ina_over_ring_bytes,
    ring_allreduce_s,
    span,
    verdict,
)

from testbed.emulation.run import Runner
from testbed.network.collectives import collective_cost, ina_allreduce_cost
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import predict_scenario, prepare
from testbed.planning.scenario_file import load_scenario

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
RESNET_CLUSTER = {"fabric.kind": "elect-cluster", "fabric.gpus_per_server": 2, "fabric.server_uplink_gbps": 50}


def run(name: str, overrides: dict | None = None, iterations: int | None = None) -> dict:
    scenario = load_scenario(ROOT / "scenarios" / name)
    changes = dict(overrides or {})
    if iterations:
        changes["workload.iterations"] = iterations
    scenario = apply_overrides(scenario, changes)
    with tempfile.TemporaryDirectory(prefix="testbed-repro-") as work:
        result = Runner(prepare(scenario), Path(work) / "run").execute()
    out = {"scenario": name, "overrides": overrides or {}, "status": result["status"],
           "emulated_ms": statistics.fmean(result["iteration_times_s"]) * 1e3 if result["iteration_times_s"] else None,
           "predicted_ms": result["predicted_iteration_time_s"] * 1e3, "sums_correct": result["sums_correct"],
           "faithful": result["fidelity"]["ok"], "dilation": result["dilation"], "byte_scale": result["byte_scale"]}
    print(json.dumps(out), flush=True)
    return out


def ratio(a: dict, b: dict, key: str) -> float | None:
    return a[key] / b[key] if a.get(key) and b.get(key) else None


PAGE_HEAD = """# Reproducing the source documents' claims

Each claim of the source documents, with the paper's figure written from the source or from its own
formula (bench/verdict_rule.py, never from the oracle), the tolerance the verdict allows, and our
figure at the paper's setup: a claim is **reproduced** only when our figure meets the paper's within
that tolerance, else **not reproduced**, with what moves it. The formula claims are measured by
emulation on this machine (real packets, `bench/reproduce.py`, {emulated}); the SiP-ML claims by
the oracle at the paper's scale and setup (N = 1,024 GPUs, the paper's compute model and split,
Elect-Cluster at 400 Gb/s as the paper's default; `bench/placer_sweep.py --setup paper`, {swept}),
one row per SiP fabric. The emulation's agreement with its own prediction is the second table's,
not part of a verdict.

| claim | the paper's figure | tolerance | ours | verdict | what moves it |
| --- | --- | --- | --- | --- | --- |
"""
EMULATED_HEAD = ["", "## At emulation scale on this machine", "",
                 "The runs behind the table and the SiP-ML claims' ratios at 4-8 GPUs (placed ResNet-50 on 4 "
                 "GPUs at 100 Gb/s, Transformer on 8 at 1 Tb/s): what was emulated, what the oracle "
                 "predicts for the same run, and their ratio.", "",
                 "| claim | emulated | predicted | emulated / predicted | faithful, sums correct |",
                 "| --- | --- | --- | --- | --- |"]


# Per claim: what moves our figure from the paper's, from the sweeps and docs/sensitivity.md
# (written by hand: it is the reading of those figures), by the claim's first words.
EXPLANATIONS = {
    "Elect-Cluster 400G over SiP-OCS": "the split, for Megatron: without column/row pairs its activations cross "
                                       "the servers' uplinks (the paper's setup reaches 5.22× at 8 Tb/s). "
                                       "ResNet-50 and the Transformer train pure DP or MP inside a server under "
                                       "either setup, so only their gradients cross (at most 1.88× with fp32 "
                                       "gradients and the ResNet-50 knee at 8,192, docs/sensitivity.md)",
    "Elect-Cluster 400G over SiP-Ring": "as over SiP-OCS; and for Megatron at low B the ring's wavelengths cap "
                                        "the peers a GPU reaches in its 16-GPU group, so Elect-Cluster is the "
                                        "faster there (0.43× at 128 Gb/s under the paper's setup)",
    "Elect-Cluster 200G": "as against 400G: under the paper's setup Megatron spans 2.23–9.52× over SiP-OCS, the "
                          "paper's range",
    "SiP-Ring over": "Megatron below 2 Tb/s: 5–40 wavelengths cap the peers of a GPU in its 16-GPU group, and "
                     "the paper's split gathers every input from every part (6.87× at 1 Tb/s); the paper "
                     "does not say how its Megatron placement met the ring's degree",
    "SiP-OCS at B": "none: holds at every point under both setups",
    "SiP-Ring at B": "Megatron: the ring's wavelengths cap the peers a GPU reaches in its 16-GPU group (1.15–5.44× "
                     "under the paper's split, 1.08–3.84× under ours); ResNet-50 and the Transformer hold at "
                     "every point",
    "Pure DP over": "the accuracy curves: at the batches they favour (32 images or one sequence a GPU) a V100 is "
                    "full either way, so MP saves no compute under either compute model; with the ResNet-50 "
                    "knee at 8,192 and fp32 gradients the paper's setup gives 1.10× (docs/sensitivity.md)",
}
# The paper's figures for the SiP-ML claims (SiP-ML, §5), by the key of claims_report.point_claims.
SIPML_FIGURES = {
    "cluster400_ocs": PaperFigure("1.3–9.1× faster than Elect-Cluster (400 Gb/s)", 1.3, 9.1, 0.10),
    "cluster400_ring": PaperFigure("1.3–9.1× faster than Elect-Cluster (400 Gb/s)", 1.3, 9.1, 0.10),
    "ring_ocs": PaperFigure("SiP-Ring close to SiP-OCS (≈ 1)", 1.0, 1.0, 0.10),
    "flat_half_ocs": PaperFigure("SiP-ML at B as well as or better than Elect-Flat at B/2 (≤ 1)", None, 1.0, 0.02),
    "flat_half_ring": PaperFigure("SiP-ML at B as well as or better than Elect-Flat at B/2 (≤ 1)", None, 1.0, 0.02),
    "dp_hybrid": PaperFigure("hybrid MP/DP up to 2× faster than pure DP at Tb/s bandwidths", None, 2.0, 0.10,
                             reaches=True),
}
# The emulated runs: a role each, its scenario and overrides (the INA run takes the ring run's
# dilation and byte scale, so both move the same bytes at the same rates).
RUNS = {
    "ring": ("quickstart.yaml", {}),
    "ina_ring": ("ina-allreduce.yaml", {"workload.algorithm": "ring"}),
    "ina": ("ina-allreduce.yaml", None),
    "byteps": ("byteps.yaml", {}),
    "byteps_ring": ("byteps.yaml", {"fabric.cpu_servers": 0, "workload.algorithm": "ring"}),
    "sip_ring": ("placed-resnet-ring.yaml", {}),
    "sip_ocs": ("placed-resnet.yaml", {"fabric.kind": "sip-ocs", "fabric.ocs_switches": 3}),
    "flat_half": ("placed-resnet.yaml", {"fabric.gpu_bandwidth_gbps": 50}),
    "cluster": ("placed-resnet.yaml", RESNET_CLUSTER),
    "hybrid": ("placed-transformer.yaml", {}),
    "pure_dp": ("placed-transformer.yaml", {"workload.model.mp": 1, "workload.model.dp": 8,
                                            "workload.model.degree": None}),
}
RING_N, RING_BYTES, RING_BPS, RING_ALPHA_S = 8, 100e6, 100e9, 5e-6  # quickstart.yaml
INA_N, BYTEPS_N, BYTEPS_K = 8, 4, 2  # ina-allreduce.yaml; byteps.yaml's GPUs and CPU machines


def emulate() -> dict[str, dict]:
    runs: dict[str, dict] = {}
    for role, (name, overrides) in RUNS.items():
        if overrides is None:  # INA at the ring run's rates
            overrides = {"emulation.dilation": runs["ina_ring"]["dilation"],
                         "emulation.byte_scale": runs["ina_ring"]["byte_scale"]}
        runs[role] = run(name, overrides)
    return runs


def saved_runs(saved: dict) -> dict[str, dict]:
    """The runs of a saved reproduce.json by role (older files listed them under their rows)."""
    if "runs" in saved:
        return saved["runs"]
    found: dict[str, dict] = {}
    for row in saved["rows"]:
        for done in row["runs"]:
            for role, (name, overrides) in RUNS.items():
                if done["scenario"] == name and (overrides is None and "emulation.dilation" in done["overrides"]
                                                 or done["overrides"] == overrides):
                    found.setdefault(role, done)
    return found


def sipml_rows(paper_rows: list[dict]) -> list[dict]:
    """Each SiP-ML claim per SiP fabric at the paper's scale and setup (every model and bandwidth;
    the hybrid claim at B ≥ 1 Tb/s, as the paper states it)."""
    points = point_claims(paper_rows)
    rows = []
    for name, key in POINT_CLAIMS:
        figure = SIPML_FIGURES.get(key)
        if figure is None:
            continue  # Elect-Cluster 200G: a sensitivity (the setup table), not the paper's baseline
        per_model: dict[str, list[float]] = {}
        for (model, b), ratios in points.items():
            if ratios[key] is not None and (key != "dp_hybrid" or b >= 1024):
                per_model.setdefault(model, []).append(ratios[key])
        values = [v for vs in per_model.values() for v in vs]
        verdict_ = verdict(figure, values)
        ours = f"{span(values)} ({'; '.join(f'{m} {span(v)}' for m, v in per_model.items())})"
        why = "" if verdict_ == "reproduced" else \
            next((text for start, text in EXPLANATIONS.items() if name.startswith(start)), "")
        rows.append({"claim": name.split(" (paper")[0], "paper": figure.text, "tolerance": figure.tolerance_text(),
                     "ours": ours, "verdict": verdict_, "why": why})
    return rows


def formula_rows(runs: dict[str, dict]) -> list[dict]:
    """The formula claims, each against its formula evaluated by hand at the emulated run's setup."""
    rows = []
    ring, ina, ina_ring = runs.get("ring"), runs.get("ina"), runs.get("ina_ring")
    byteps, byteps_ring = runs.get("byteps"), runs.get("byteps_ring")
    if ring:
        expected = ring_allreduce_s(RING_N, RING_BYTES, RING_BPS, RING_ALPHA_S) * 1e3
        figure = PaperFigure(f"2(n−1)·α + 2(n−1)/n·M/B = {expected:.2f} ms (n = 8, M = 100 MB, B = 100 Gb/s, "
                             f"α = 5 µs)", expected, expected, 0.05)
        value = [ring["emulated_ms"]] if ring.get("emulated_ms") else []
        rows.append({"claim": "Ring all-reduce takes 2(n−1)·α + 2(n−1)/n·M/B", "paper": figure.text,
                     "tolerance": figure.tolerance_text(), "ours": f"{span(value)} ms emulated",
                     "verdict": verdict(figure, value), "why": ""})
    if ina and ina_ring:
        expected = ina_over_ring_bytes(INA_N)
        figure = PaperFigure(f"n/(2(n−1)) = {expected:.3f} at n = 8 (→ 0.5 at large n)", expected, expected, 0.05)
        value = [v] if (v := ratio(ina, ina_ring, "emulated_ms")) else []
        rows.append({"claim": "INA: one round and M per GPU, about half of ring's data and time at large n",
                     "paper": figure.text, "tolerance": figure.tolerance_text(),
                     "ours": f"INA/ring {span(value)} emulated (same fabric and rates)",
                     "verdict": verdict(figure, value), "why": ""})
    if byteps and byteps_ring:
        expected = byteps_over_ring_bytes(BYTEPS_N, BYTEPS_K)
        figure = PaperFigure(f"n²/(n²+kn−2k) = {expected:.3f} (n = 4, k = 2)", expected, expected, 0.05)
        value = [v] if (v := ratio(byteps, byteps_ring, "emulated_ms")) else []
        rows.append({"claim": "BytePS: with k CPU machines each machine moves 2n(n−1)/(n²+kn−2k)·M instead of "
                              "2(n−1)/n·M", "paper": figure.text, "tolerance": figure.tolerance_text(),
                     "ours": f"BytePS/ring {span(value)} emulated", "verdict": verdict(figure, value),
                     "why": "" if figure.met(value) else "the chunk pipeline's start and end, which the load "
                                                          "split leaves out"})
    rows += latency_rows()
    rows.append(zero_reconfiguration_row())
    return rows


def zero_reconfiguration_row() -> dict:
    """SiP-ML's footnote: with no reconfiguration delay SiP-OCS would equal Elect-Flat. The oracle's
    prediction of the placed ResNet-50 (4 GPUs, 100 Gb/s) on multi-shot SiP-OCS re-planning at no
    cost, over Elect-Flat's."""
    base = load_scenario(ROOT / "scenarios" / "placed-resnet.yaml")
    flat = predict_scenario(base).iteration_time_s
    values = []
    for switches in (2, 3):
        ocs = apply_overrides(base, {"fabric.kind": "sip-ocs", "fabric.ocs_switches": switches,
                                     "fabric.reconfig_us": 0, "fabric.multi_shot": True})
        values.append(predict_scenario(ocs).iteration_time_s / flat)
    figure = PaperFigure("SiP-OCS with no reconfiguration delay equals Elect-Flat (= 1)", 1.0, 1.0, 0.05)
    verdict_ = verdict(figure, values)
    return {"claim": "SiP-OCS without reconfiguration delay is Elect-Flat (SiP-ML, footnote 4)", "paper": figure.text,
            "tolerance": figure.tolerance_text(),
            "ours": f"SiP-OCS/Elect-Flat {values[0]:.2f} (Q = 2), {values[1]:.2f} (Q = 3) (oracle, placed ResNet-50, "
                    f"4 GPUs, re-planned every 100 µs at no cost)", "verdict": verdict_,
            "why": "" if verdict_ == "reproduced" else
            "each of a GPU's Q circuits carries B/Q, so a transfer to one peer gets B/Q however fast the circuits "
            "move, where Elect-Flat gives it B; the footnote holds only where every GPU spreads its traffic "
            "over Q peers at once"}


def latency_rows() -> list[dict]:
    """INA's static latency against ring's and halving-doubling's: the oracle's cost of a 1-byte
    all-reduce (its α terms alone) against the article's count of sends (one for INA, 2(n−1) for
    ring, 2·log2 n for halving-doubling)."""
    rows = []
    for algorithm, rounds, label in (("ring", "2(n−1)", "ring"), ("halving-doubling", "2·log2 n", "HD")):
        values = {}
        for n in (2, 4, 8):
            theirs = collective_cost("allreduce", algorithm, n, 1, RING_BPS, RING_ALPHA_S).time_s
            values[n] = ina_allreduce_cost(n, 1, RING_BPS, RING_ALPHA_S).time_s / theirs
        figure = PaperFigure(f"1 send against {rounds}: at least 50% lower (INA/{label} ≤ 0.5 from n = 2)", None, 0.5,
                             0.02)
        verdict_ = verdict(figure, list(values.values()))
        rows.append({"claim": f"INA's static latency at least 50% below {label}'s", "paper": figure.text,
                     "tolerance": figure.tolerance_text(),
                     "ours": "INA/" + label + " " + ", ".join(f"{v:.2f} at n = {n}" for n, v in values.items())
                             + " (oracle, 1-byte all-reduce)", "verdict": verdict_,
                     "why": "" if verdict_ == "reproduced" else
                     "the sum's return to each GPU is a second message (2α, and the switch's time), where the "
                     "article counts one send: at n = 2 ring's 2(n−1) = 2 sends cost as much; the gap opens as n "
                     "grows"})
    return rows


def emulated_lines(runs: dict[str, dict]) -> list[str]:
    """The second table: per claim at emulation scale, emulated and predicted side by side."""
    pairs = [("Ring all-reduce (8 GPUs, 100 MB, 100 Gb/s), ms", "ring", None),
             ("INA / ring (8 GPUs)", "ina", "ina_ring"),
             ("BytePS / ring (n = 4, k = 2)", "byteps", "byteps_ring"),
             ("SiP-Ring / SiP-OCS (placed ResNet-50)", "sip_ring", "sip_ocs"),
             ("SiP-OCS at B / Elect-Flat at B/2", "sip_ocs", "flat_half"),
             ("SiP-Ring at B / Elect-Flat at B/2", "sip_ring", "flat_half"),
             ("Elect-Cluster / SiP-OCS", "cluster", "sip_ocs"),
             ("Elect-Cluster / SiP-Ring", "cluster", "sip_ring"),
             ("pure DP / hybrid (Transformer, 8 GPUs, 1 Tb/s)", "pure_dp", "hybrid")]
    lines = list(EMULATED_HEAD)
    for label, top, bottom in pairs:
        a, b = runs.get(top), runs.get(bottom) if bottom else None
        if a is None or (bottom and b is None):
            continue
        parts = [a] + ([b] if b else [])
        emulated = a["emulated_ms"] if b is None else ratio(a, b, "emulated_ms")
        predicted = a["predicted_ms"] if b is None else ratio(a, b, "predicted_ms")
        agree = emulated / predicted if emulated and predicted else None
        ok = "yes" if all(p["faithful"] and p["sums_correct"] for p in parts) else \
            ", ".join(f"{p['scenario']}: faithful {p['faithful']}, sums {p['sums_correct']}" for p in parts)
        lines.append(f"| {label} | {emulated:.3f} | {predicted:.3f} | {agree:.3f} | {ok} |"
                     if emulated and predicted and agree else f"| {label} | — | — | — | {ok} |")
    return lines


def setup_table() -> list[str]:
    """Each SiP-ML claim: the paper's figure, ours under the paper's setup, ours under the default."""
    default, paper = RESULTS / "placer_sweep.json", RESULTS / "placer_sweep_paper.json"
    if not (default.exists() and paper.exists()):
        return []
    lines = ["", "## SiP-ML at paper scale: the paper's setup beside ours", "",
             "The oracle's sweep at N = 1,024 GPUs (128 Gb/s to 8 Tb/s, ResNet-50, Transformer, Megatron) run "
             "twice: under the paper's method (`--setup paper`: its compute model, `efficiency: paper`, and "
             "its output-channel split, `split_pairing: false`), which the verdicts above use, and under the "
             "project's default; Elect-Cluster at 200 Gb/s as a sensitivity. Ratios of times to accuracy, the "
             "range over models and bandwidths, then per model; docs/sipml-claims.md has every point.", "",
             "| claim (paper's figure) | ours, paper's setup | ours, default | what explains the difference |",
             "| --- | --- | --- | --- |"]
    for claim, theirs, ours in claims_summary(json.loads(default.read_text())["rows"],
                                              json.loads(paper.read_text())["rows"]):
        why = next((text for start, text in EXPLANATIONS.items() if claim.startswith(start)), "")
        lines.append(f"| {claim} | {theirs} | {ours} | {why} |")
    return lines


def write_page(runs: dict[str, dict], emulated_when: str) -> None:
    paper = json.loads((RESULTS / "placer_sweep_paper.json").read_text())
    rows = formula_rows(runs) + sipml_rows(paper["rows"])
    lines = [PAGE_HEAD.format(emulated=emulated_when[:10], swept=paper["when"][:10]).rstrip("\n")]
    lines += [f"| {r['claim']} | {r['paper']} | {r['tolerance']} | {r['ours']} | **{r['verdict']}** | {r['why']} |"
              for r in rows]
    lines += emulated_lines(runs)
    lines += setup_table()
    lines += replan_tables()
    notes = (ROOT / "docs" / "reproduction-notes.md")
    text = "\n".join(lines) + "\n"
    if notes.exists():
        text += "\n" + notes.read_text()
    (ROOT / "docs" / "reproduction.md").write_text(text)
    print(text)


def main() -> int:
    import sys

    if "--page-only" in sys.argv:  # rebuild docs/reproduction.md from the last results (no root)
        saved = json.loads((RESULTS / "reproduce.json").read_text())
        write_page(saved_runs(saved), saved["when"])
        return 0
    runs = emulate()
    RESULTS.mkdir(exist_ok=True)
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    (RESULTS / "reproduce.json").write_text(json.dumps({"when": when, "runs": runs}, indent=1) + "\n")
    write_page(runs, when)
    return 0 if all(r["status"] == "ok" and r["sums_correct"] for r in runs.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

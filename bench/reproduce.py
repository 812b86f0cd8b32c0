"""The reproduction suite: each claim of the source documents tested at emulation scale on this machine (real
runs, emulated beside predicted) and with the oracle at paper scale, beside the paper's figure.

Run as root: `.venv/bin/python bench/reproduce.py` (about 10 minutes; `--page-only` rebuilds the
page from the last results). Writes
bench/results/reproduce.json and docs/reproduction.md. The paper-scale SiP-ML figures come from
bench/results/placer_sweep.json (bench/placer_sweep.py, no root), and the table of the paper's
setup beside ours from it and bench/results/placer_sweep_paper.json (`--setup paper`).
"""

from __future__ import annotations

import json
import statistics
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from claims_report import claims as sweep_claims
from claims_report import claims_summary
from replan_tables import replan_tables

from testbed.emulation.run import Runner
from testbed.network.collectives import collective_cost, ina_allreduce_cost
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import prepare
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


def verdict(emulated: float | None, predicted: float | None, paper_holds: bool | None) -> str:
    """reproduced: emulation agrees with the oracle within 10% and the oracle with the paper;
    partly: one of the two; not reproduced: neither."""
    agrees = emulated is not None and predicted is not None and abs(emulated / predicted - 1) <= 0.1
    if agrees and paper_holds:
        return "reproduced"
    if agrees or paper_holds:
        return "partly reproduced"
    return "not reproduced"


PAGE_HEAD = """# Reproducing the source documents' claims

Each claim of the source documents, tested twice: at emulation scale on this machine (real packets: the
emulated figure, beside what the oracle predicts for the same run), and with the oracle at paper
scale (N = 1,024 GPUs, from `bench/placer_sweep.py` for the SiP-ML claims). A claim is
**reproduced** when the emulation agrees with the oracle within 10% and the oracle agrees with the
paper, **partly reproduced** when only one holds, **not reproduced** when neither does. The
emulated figures were measured by `bench/reproduce.py` (root, about 10 minutes) on {emulated}, the
paper-scale ones come from the sweeps of {swept}; the notes under the table say why.

| claim | emulated (this machine) | predicted (oracle) | paper | verdict |
| --- | --- | --- | --- | --- |
"""


SWEEP_SAYS = "; at N = 1,024 (oracle sweep): "
# Per claim of the setup table: which setting moves our figure from the paper's, from the two
# sweeps and docs/sensitivity.md (written by hand: it is the reading of those figures).
EXPLANATIONS = {
    "Elect-Cluster 400G": "the split, for Megatron: without column/row pairs its activations cross the servers' "
                          "uplinks (the paper's setup reaches 5.22× at 8 Tb/s). ResNet-50 and the Transformer "
                          "train pure DP or MP inside a server under either setup, so only their gradients "
                          "cross (at most 1.88× with fp32 gradients and the ResNet-50 knee at 8,192, "
                          "docs/sensitivity.md)",
    "Elect-Cluster 200G": "as against 400G: under the paper's setup Megatron spans 2.23–9.52×, the paper's range",
    "SiP-Ring over": "Megatron below 2 Tb/s: 5–40 wavelengths cap the peers of a GPU in its 16-GPU group, and "
                     "the paper's split gathers every input from every part (6.87× at 1 Tb/s); the paper "
                     "does not say how its Megatron placement met the ring's degree",
    "Best SiP fabric": "none: holds at every point under both setups",
    "Pure DP over": "the accuracy curves: at the batches they favour (32 images or one sequence a GPU) a V100 is "
                    "full either way, so MP saves no compute under either compute model; with the ResNet-50 "
                    "knee at 8,192 and fp32 gradients the paper's setup gives 1.10× (docs/sensitivity.md)",
}


def setup_table() -> list[str]:
    """Each SiP-ML claim: the paper's figure, ours under the paper's setup, ours under the default."""
    default, paper = RESULTS / "placer_sweep.json", RESULTS / "placer_sweep_paper.json"
    if not (default.exists() and paper.exists()):
        return []
    lines = ["", "## SiP-ML at paper scale: the paper's setup beside ours", "",
             "The oracle's sweep at N = 1,024 GPUs (128 Gb/s to 8 Tb/s, ResNet-50, Transformer, Megatron) run "
             "twice: under the paper's method (`--setup paper`: its compute model, `efficiency: paper`, and "
             "its output-channel split, `split_pairing: false`) and under the project's default. Ratios of "
             "times to accuracy, the range over models and bandwidths, then per model; docs/sipml-claims.md "
             "has every point.", "",
             "| claim (paper's figure) | ours, paper's setup | ours, default | what explains the difference |",
             "| --- | --- | --- | --- |"]
    for claim, theirs, ours in claims_summary(json.loads(default.read_text())["rows"],
                                              json.loads(paper.read_text())["rows"]):
        why = next((text for start, text in EXPLANATIONS.items() if claim.startswith(start)), "")
        lines.append(f"| {claim} | {theirs} | {ours} | {why} |")
    return lines


def write_page(rows: list[dict], emulated: str) -> None:
    swept = json.loads((RESULTS / "placer_sweep.json").read_text())["when"][:10]
    lines = [PAGE_HEAD.format(emulated=emulated[:10], swept=swept).rstrip("\n")]
    lines += [f"| {r['claim']} | {r['emulated']} | {r['predicted']} | {r['paper']} | **{r['verdict']}** |"
              for r in rows]
    lines += setup_table()
    lines += replan_tables()
    notes = (ROOT / "docs" / "reproduction-notes.md")
    text = "\n".join(lines) + "\n"
    if notes.exists():
        text += "\n" + notes.read_text()
    (ROOT / "docs" / "reproduction.md").write_text(text)
    print(text)


def sweep_figure(paper_scale: dict[str, str], claim: str) -> str | None:
    """What the paper-scale sweep measured for `claim` (its claims are worded alike at the start)."""
    return next((text for key, text in paper_scale.items() if key.startswith(claim[:20])), None)


def with_current_sweep(rows: list[dict]) -> list[dict]:
    """The rows with their paper-scale figures from the current bench/results/placer_sweep.json."""
    paper_scale = dict(sweep_claims(json.loads((RESULTS / "placer_sweep.json").read_text())["rows"]))
    refreshed = []
    for row in rows:
        if SWEEP_SAYS in row["predicted"]:
            emulation_scale = row["predicted"].split(SWEEP_SAYS)[0]
            figure = sweep_figure(paper_scale, row["claim"])
            if figure is not None:
                row = dict(row, predicted=f"{emulation_scale}{SWEEP_SAYS}{figure}")
        refreshed.append(row)
    return refreshed


def main() -> int:
    import sys

    if "--page-only" in sys.argv:  # rebuild docs/reproduction.md from the last results (no root)
        saved = json.loads((RESULTS / "reproduce.json").read_text())
        write_page(with_current_sweep(saved["rows"]), saved["when"])
        return 0
    rows = []
    # 1. Ring all-reduce cost
    ring = run("quickstart.yaml")
    m, b, a = 100e6, 100e9, 5e-6
    paper_1024 = collective_cost("allreduce", "ring", 1024, m, b, a).time_s * 1e3
    rows.append({"claim": "Ring all-reduce takes 2(n−1)·α + 2(n−1)/n·M/B; each GPU sends about 2M",
                 "emulated": f"{ring['emulated_ms']:.2f} ms (8 GPUs, 100 MB, 100 Gb/s); each GPU sends "
                             f"2(n−1)/n·M = 1.75 M",
                 "predicted": f"{ring['predicted_ms']:.2f} ms; at N = 1,024: {paper_1024:.2f} ms",
                 "paper": "2(n−1)·α + 2(n−1)/n·M/B = 14.07 ms at N = 8",
                 "verdict": verdict(ring["emulated_ms"], ring["predicted_ms"], True), "runs": [ring]})
    # 2. INA halves ring's data and time
    ring8 = run("ina-allreduce.yaml", {"workload.algorithm": "ring"})
    ina8 = run("ina-allreduce.yaml",
               {"emulation.dilation": ring8["dilation"], "emulation.byte_scale": ring8["byte_scale"]})
    measured, predicted = ratio(ina8, ring8, "emulated_ms"), ratio(ina8, ring8, "predicted_ms")
    at_1024 = ina_allreduce_cost(1024, m, b, a).time_s / collective_cost("allreduce", "ring", 1024, m, b, a).time_s
    rows.append({"claim": "INA: one round and M per GPU, about half of ring's data and time at large n",
                 "emulated": f"INA/ring {measured:.3f} at N = 8 (same fabric and rates)",
                 "predicted": f"{predicted:.3f} at N = 8; {at_1024:.3f} at N = 1,024",
                 "paper": f"n/(2(n−1)) = {8 / 14:.3f} at N = 8, → 0.5",
                 "verdict": verdict(measured, predicted, at_1024 < 0.55), "runs": [ring8, ina8]})
    # 3. BytePS with k CPU machines
    byteps = run("byteps.yaml")
    allreduce = run("byteps.yaml", {"fabric.cpu_servers": 0, "workload.algorithm": "ring"})
    measured, predicted = ratio(byteps, allreduce, "emulated_ms"), ratio(byteps, allreduce, "predicted_ms")
    optimum = 16 / (16 + 4 * 2 - 2 * 2)  # n²/(n²+kn−2k): BytePS's per-machine data over ring's, n=4 k=2
    rows.append({"claim": "BytePS: with k CPU machines each machine moves 2n(n−1)/(n²+kn−2k)·M instead of "
                          "2(n−1)/n·M",
                 "emulated": f"BytePS/ring {measured:.3f} (n = 4, k = 2)",
                 "predicted": f"{predicted:.3f} (the chunk pipeline as max-min fair flows)",
                 "paper": f"{optimum:.3f} (the load split alone)",
                 "verdict": verdict(measured, predicted, abs(predicted / optimum - 1) <= 0.1),
                 "runs": [byteps, allreduce]})
    # 4.-6. SiP-ML claims at emulation scale: placed ResNet-50 (mp 2 × dp 2, 100 Gb/s)
    sip_ring = run("placed-resnet-ring.yaml")
    sip_ocs = run("placed-resnet.yaml", {"fabric.kind": "sip-ocs", "fabric.ocs_switches": 3})
    flat_half = run("placed-resnet.yaml", {"fabric.gpu_bandwidth_gbps": 50})
    cluster = run("placed-resnet.yaml", RESNET_CLUSTER)
    sweep = json.loads((RESULTS / "placer_sweep.json").read_text())
    paper_scale = dict(sweep_claims(sweep["rows"]))
    sip_best = min((r for r in (sip_ring, sip_ocs) if r["emulated_ms"]), key=lambda r: r["emulated_ms"])
    for claim, mine, other, paper, holds in (
        ("SiP-Ring performs close to SiP-OCS", sip_ring, sip_ocs, "close (SiP-Ring/SiP-OCS ≈ 1)",
         lambda x: x is not None and x <= 1.25),
        ("SiP-ML at B does as well as or better than Elect-Flat at B/2", sip_best, flat_half, "≤ 1",
         lambda x: x is not None and x <= 1.0),
        ("SiP-ML is 1.3–9.1× faster than Elect-Cluster in time-to-accuracy", cluster, sip_best,
         "1.3–9.1 (Elect-Cluster/SiP-ML)", lambda x: x is not None and x >= 1.3),
    ):
        measured, predicted = ratio(mine, other, "emulated_ms"), ratio(mine, other, "predicted_ms")
        rows.append({"claim": claim,
                     "emulated": f"{measured:.3f} (placed ResNet-50, 4 GPUs: {mine['scenario']} "
                                 f"{mine['overrides'] or ''} over {other['scenario']} {other['overrides'] or ''})",
                     "predicted": f"{predicted:.3f}{SWEEP_SAYS}{sweep_figure(paper_scale, claim)}",
                     "paper": paper, "verdict": verdict(measured, predicted, holds(predicted)),
                     "runs": [mine, other]})
    # 7. Hybrid MP/DP against pure DP at high bandwidth: placed Transformer at 1 Tb/s
    hybrid = run("placed-transformer.yaml")
    pure_dp = run("placed-transformer.yaml", {"workload.model.mp": 1, "workload.model.dp": 8,
                                              "workload.model.degree": None})
    measured, predicted = ratio(pure_dp, hybrid, "emulated_ms"), ratio(pure_dp, hybrid, "predicted_ms")
    rows.append({"claim": "Hybrid MP/DP beats pure DP by up to 2× at Tb/s bandwidths",
                 "emulated": f"pure DP/hybrid {measured:.3f} (Transformer, 8 GPUs, global batch 16, 1 Tb/s)",
                 "predicted": f"{predicted:.3f}{SWEEP_SAYS}{sweep_figure(paper_scale, 'Hybrid MP/DP beats')}",
                 "paper": "up to 2", "verdict": verdict(measured, predicted, predicted is not None and predicted > 1),
                 "runs": [hybrid, pure_dp]})
    RESULTS.mkdir(exist_ok=True)
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    (RESULTS / "reproduce.json").write_text(json.dumps({"when": when, "rows": rows}, indent=1) + "\n")
    write_page(rows, when)
    return 0 if all(run_["status"] == "ok" and run_["sums_correct"] for r in rows for run_ in r["runs"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())

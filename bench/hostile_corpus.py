"""Benchmark: the hostile-input corpus (tests/hostile_corpus.py) run as a user would, tallied by
kind: tried, clean, and each failure (traceback, hang, silent wrong answer, unclear sentence), with
the slowest case. No root: `.venv/bin/python bench/hostile_corpus.py [--only KIND]`. Writes
bench/results/hostile_corpus.json and .md (the whole corpus only)."""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from bench_results import RESULTS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.hostile_corpus import corpus, run_case  # noqa: E402

STATUSES = ("clean", "traceback", "hang", "wrong", "unclear")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=None, help="run only the cases of this kind")
    args = parser.parse_args()
    cases = [c for c in corpus() if args.only is None or c.kind == args.only]
    by_kind: dict[str, Counter] = {}
    slowest: dict[str, tuple[float, str]] = {}
    for case in cases:
        with tempfile.TemporaryDirectory(prefix="testbed-hostile-") as work:
            outcome = run_case(case, Path(work))
        by_kind.setdefault(case.kind, Counter())[outcome.status] += 1
        if outcome.seconds > slowest.get(case.kind, (0.0, ""))[0]:
            slowest[case.kind] = (outcome.seconds, case.name)
        if outcome.status != "clean":
            print(f"{outcome.status}: {case.kind}: {case.name}: {outcome.detail}", flush=True)
    rows = [{"kind": kind, "tried": sum(counts.values()), **{s: counts[s] for s in STATUSES},
             "slowest_s": slowest[kind][0], "slowest_case": slowest[kind][1]} for kind, counts in by_kind.items()]
    total = Counter()
    for counts in by_kind.values():
        total.update(counts)
    rows.append({"kind": "all", "tried": sum(total.values()), **{s: total[s] for s in STATUSES},
                 "slowest_s": max(r["slowest_s"] for r in rows), "slowest_case": "",
                 "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6})
    header = ["Each case run in one process as a user would (the CLI's main, or the API), stopped at 60 s; "
              "`wrong` is an answer where a refusal was due, or check and predict disagreeing "
              "(bench/hostile_corpus.py, cases in tests/hostile_corpus.py).", "",
              "| kind | tried | clean | traceback | hang | wrong | unclear | slowest s | slowest case |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    table = "\n".join(header + [f"| {r['kind']} | {r['tried']} | " + " | ".join(str(r[s]) for s in STATUSES)
                                 + f" | {r['slowest_s']:.1f} | {r['slowest_case']} |" for r in rows])
    print(table)
    if args.only is not None:  # a part of the corpus: printed, the whole corpus's record kept
        return 0 if total["clean"] == sum(total.values()) else 1
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "hostile_corpus.json").write_text(json.dumps(
        {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "rows": rows}, indent=1) + "\n")
    (RESULTS / "hostile_corpus.md").write_text(table + "\n")
    return 0 if total["clean"] == sum(total.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

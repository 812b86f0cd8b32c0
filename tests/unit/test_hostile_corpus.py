"""The hostile-input corpus (tests/hostile_corpus.py), by kind: every case refused in one sentence
with exit 2, or answered with a finite figure where an answer is due; no traceback, no hang, `check`
refusing what `predict` refuses. bench/hostile_corpus.py prints the same tally."""

from __future__ import annotations

import pytest

from ..hostile_corpus import corpus, run_case

CASES = corpus()


def test_the_corpus_holds_at_least_three_hundred_cases_of_every_kind():
    kinds = {case.kind for case in CASES}
    assert len(CASES) >= 300 and len(kinds) >= 9
    assert len({(case.kind, case.name) for case in CASES}) == len(CASES)  # each case named once


@pytest.mark.parametrize("case", CASES, ids=[f"{c.kind}: {c.name}" for c in CASES])
def test_a_hostile_input_gets_one_sentence_or_a_sane_answer(case, tmp_path):
    outcome = run_case(case, tmp_path)
    assert outcome.status == "clean", f"{outcome.status}: {outcome.detail}"

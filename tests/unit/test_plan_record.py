"""`testbed predict --plans DIR`: the circuit or wavelength plans a prediction used, as JSON and a
picture, and a plain refusal where there is no schedule to follow."""

from __future__ import annotations

import json
import subprocess
import sys

from ..conftest import ROOT


def predict(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "testbed", "predict", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_the_plans_of_a_re_planning_fabric_are_written(tmp_path):
    """scenarios/ocs-multishot.yaml told to retune whenever a re-plan gains its dark time: 4 GPUs on
    3 switches of B/3 each: a GPU's circuits out carry at most B = 100 Gb/s in whole circuits of B/3
    in every plan of the steady iteration, and the prediction retunes (its plans differ)."""
    scenario = tmp_path / "retuning.yaml"
    scenario.write_text((ROOT / "scenarios" / "ocs-multishot.yaml").read_text()
                        .replace("  multi_shot: true\n", "  multi_shot: true\n  retune_threshold_us: 200\n"))
    done = predict(str(scenario), "--plans", str(tmp_path / "plans"))
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "plans" / "plans.json").read_text())
    assert (tmp_path / "plans" / "plans.png").stat().st_size > 0
    assert record["hosts"] == 4 and len(record["plans"]) >= 2
    assert len({str(plan["links"]) for plan in record["plans"]}) >= 2
    for plan in record["plans"]:
        out = [sum(link["gbps"] for link in plan["links"] if link["src"] == g) for g in range(4)]
        assert all(total <= 100 + 1e-6 for total in out), out
        assert all(abs(link["gbps"] * 3 / 100 - round(link["gbps"] * 3 / 100)) < 1e-9 for link in plan["links"])


def test_a_switched_fabric_has_one_plan_without_links(tmp_path):
    done = predict("scenarios/quickstart.yaml", "--plans", str(tmp_path / "p"))
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "p" / "plans.json").read_text())
    assert [plan["links"] for plan in record["plans"]] == [[]]


def test_closed_form_predictions_have_no_plans_to_write(tmp_path):
    done = predict("scenarios/gpt3-175b-article.yaml", "--plans", str(tmp_path / "p"))
    assert done.returncode == 2 and "closed form" in done.stderr and "Traceback" not in done.stderr

"""The scenario field reference and JSON schema are made from the models: docs/scenario.md must be
what `testbed schema --markdown` prints, every field must say what it means, and the schema must
accept every shipped scenario and refuse what the parser refuses."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
import yaml

from testbed.interface.field_reference import json_schema, reference_markdown, undocumented_fields

from ..conftest import ROOT


def test_docs_scenario_md_is_what_the_models_say():
    written = (ROOT / "docs" / "scenario.md").read_text()
    assert written == reference_markdown(), "regenerate it: testbed schema --markdown > docs/scenario.md"


def test_every_field_says_what_it_means():
    assert undocumented_fields() == []


def test_the_fields_a_newcomer_looked_for_are_in_the_reference():
    text = reference_markdown()
    for field in ("ocs_switches", "gpus_per_server", "server_uplink_gbps", "wavelengths", "neighbors",
                  "reconfig_us", "estimate_period_us", "cpu_servers", "slots", "dp_bucket_bytes", "max_wall_s"):
        assert f"| `{field}` |" in text, field
    assert "| `hosts` | int | required | ≥ 2, ≤ 16,384 |" in text


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.stem)
def test_the_json_schema_accepts_every_shipped_scenario(path):
    jsonschema.validate(yaml.safe_load(path.read_text()), json.loads(json_schema()))


def test_the_json_schema_refuses_another_kinds_field_and_an_unknown_kind():
    schema = json.loads(json_schema())
    base = yaml.safe_load((ROOT / "scenarios" / "quickstart.yaml").read_text())
    for fabric in ({**base["fabric"], "wavelengths": 16}, {**base["fabric"], "kind": "sip-ocss"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**base, "fabric": fabric}, schema)


def test_testbed_schema_prints_both():
    for extra, start in (([], "{"), (["--markdown"], "# Scenario file reference")):
        done = subprocess.run([sys.executable, "-m", "testbed", "schema", *extra], capture_output=True, text=True,
                              cwd=ROOT, timeout=60)
        assert done.returncode == 0 and done.stdout.startswith(start), done.stderr

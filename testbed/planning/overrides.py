"""`--set` overrides: dotted paths into a scenario (`fabric.hosts=16`, `jobs.1.gpus=4`), and keys
that apply to one fabric kind only (`sip-ring:fabric.wavelengths=32`), re-validated as a whole."""

from __future__ import annotations

from typing import Any

from testbed.fabrics.all_kinds import SECTIONS as FABRIC_SECTIONS
from testbed.model.errors import InputError
from testbed.model.scenario import Scenario
from testbed.planning.scenario_file import parse_scenario


def override_applies(key: str, kind: str) -> bool:
    """Whether an override key applies to a fabric of `kind`: a `<kind>:<field>` key only to that kind."""
    prefix, sep, _ = key.rpartition(":")
    if sep and prefix not in FABRIC_SECTIONS:
        raise InputError(f"override {key}: {prefix!r} is not a fabric kind ({', '.join(FABRIC_SECTIONS)})")
    return not sep or prefix == kind


def effective_overrides(scenario: Scenario, overrides: dict[str, Any]) -> dict[str, Any]:
    """The overrides that apply: a key written `<kind>:<field>` (e.g. `sip-ring:fabric.wavelengths`)
    only where the fabric's kind, after `fabric.kind` is overridden, is that kind, so one sweep can
    cross fabrics and give each kind its own fields."""
    kind_after = overrides.get("fabric.kind", scenario.fabric.kind)
    return {key.rpartition(":")[2]: value for key, value in overrides.items() if override_applies(key, kind_after)}


def apply_overrides(scenario: Scenario, overrides: dict[str, Any]) -> Scenario:
    """Return a copy with dotted-path overrides applied (e.g. {'fabric.hosts': 4}), re-validated.
    Where `fabric.kind` changes, the fabric keeps only the fields the new kind has (the others
    belonged to the old kind); `<kind>:<field>` keys apply to that kind only."""
    data = scenario.model_dump(mode="python", exclude_unset=True)
    overrides = effective_overrides(scenario, overrides)
    new_kind = overrides.get("fabric.kind")
    if isinstance(new_kind, str) and new_kind != scenario.fabric.kind and new_kind in FABRIC_SECTIONS:
        data["fabric"] = {k: v for k, v in data["fabric"].items() if k in FABRIC_SECTIONS[new_kind].model_fields}
    for dotted, value in overrides.items():
        node: Any = data
        parts = dotted.split(".")
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            if isinstance(node, list):  # a list's items by index: jobs.1.gpus
                if not part.isdigit() or int(part) >= len(node):
                    raise InputError(f"override {dotted}: {'.'.join(parts[:depth])} has items 0..{len(node) - 1}, "
                                     f"not {part!r}")
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
            elif not isinstance(node, dict):
                raise InputError(f"override {dotted}: {'.'.join(parts[:depth])} is a value, not a section")
            elif last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
    return parse_scenario(data, f"{scenario.name} (with overrides)")

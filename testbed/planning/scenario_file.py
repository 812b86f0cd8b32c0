"""Reading a scenario file: its `fabric` and `workload` sections are discriminated unions on `kind`
of every registered kind's section, so a field of another kind is a schema error by construction;
every problem becomes one sentence naming the file and the field (testbed.planning.input_wording)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from testbed.fabrics.all_kinds import AnyFabric
from testbed.model.errors import InputError
from testbed.model.fabric_section import FabricSection, Strict
from testbed.model.input_files import SCENARIO_BYTES, read_text
from testbed.model.scenario import Scenario, ScenarioOf
from testbed.planning.input_wording import describe_validation_error
from testbed.workloads.all_kinds import AnyWorkload

ScenarioFile = ScenarioOf[AnyFabric, AnyWorkload]


class _FabricOnly(Strict):
    """A fabric section alone, worded as a scenario's `fabric` would be."""

    fabric: AnyFabric


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    if not isinstance(data, dict):
        raise InputError(f"{source}: a scenario must be a YAML mapping with name, fabric and workload")
    try:
        return ScenarioFile.model_validate(data)
    except RecursionError:
        raise InputError(f"{source}: nested too deeply to read; a scenario's sections are a few levels "
                         f"deep") from None
    except ValidationError as error:
        raise InputError(describe_validation_error(error, source, ScenarioFile)) from None


def make_fabric(source: str = "<fabric>", **fields: Any) -> FabricSection:
    """One fabric section from its fields (as a scenario's `fabric` mapping holds them)."""
    try:
        return _FabricOnly.model_validate({"fabric": fields}).fabric
    except ValidationError as error:
        raise InputError(describe_validation_error(error, source, _FabricOnly)) from None


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int, unhashable: bool = False) -> None:
        super().__init__(key, line)
        self.key, self.line, self.unhashable = key, line, unhashable


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's own loader keeps the last of two equal keys; a scenario with both is a mistake."""


def _unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise _DuplicateKey(key, key_node.start_mark.line + 1, unhashable=True)
        if key in seen:
            raise _DuplicateKey(key, key_node.start_mark.line + 1)
        seen.add(key)
    return dict(loader.construct_mapping(node, deep=deep))


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)
# YAML 1.1 reads 1e9 (no dot, no sign in the exponent) as a string; users mean the number, as YAML
# 1.2 and JSON read it (`bytes: 1e9` was refused as "not a valid integer").
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?([0-9][0-9_]*\.?[0-9_]*|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def yaml_value(text: str) -> Any:
    """One YAML value as a scenario file reads it (--set values, sweeps)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)


# A file larger than a scenario would take minutes and gigabytes to parse before saying so.
MAX_SCENARIO_BYTES = SCENARIO_BYTES


def scenario_text(path: Path) -> str:
    """A scenario file's text: a regular file of at most MAX_SCENARIO_BYTES of UTF-8 (a BOM allowed)."""
    if not path.exists():
        raise InputError(f"{path}: no such scenario file; check the path")
    return read_text(path, "a scenario's YAML file (traces in files of their own)", MAX_SCENARIO_BYTES)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; every problem becomes an InputError."""
    path = Path(path)
    text = scenario_text(path)
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to read; a scenario's sections are a few levels "
                         f"deep") from None
    except _DuplicateKey as duplicate:
        if duplicate.unhashable:
            raise InputError(f"{path}: a key that is a {type(duplicate.key).__name__} (line {duplicate.line}); "
                             f"a scenario's keys are names") from None
        raise InputError(f"{path}: key '{duplicate.key}' appears twice in one mapping (line {duplicate.line}); "
                         f"keep one") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}: not valid YAML{line}; fix the syntax") from None
    workload = data.get("workload") if isinstance(data, dict) else None
    for field in ("trace", "path", "comm_groups"):
        if isinstance(workload, dict) and isinstance(workload.get(field), str):
            # a trace's path is relative to the scenario file, wherever testbed runs from
            workload[field] = str((path.parent / workload[field]).resolve())
    return parse_scenario(data, str(path))


def scenario_to_yaml(scenario: Scenario, resolved: dict[str, Any] | None = None) -> str:
    """The scenario with every default filled in (and `resolved` emulation values); it re-validates."""
    data = scenario.model_dump(mode="json", exclude_none=True)
    if resolved:
        data["emulation"].update(resolved)
    return str(yaml.safe_dump(data, sort_keys=False))

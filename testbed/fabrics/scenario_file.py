"""Reading a scenario file (DESIGN §3.1): its `fabric` section is a discriminated union on `kind`
of every registered kind's section, so a field of another kind is a schema error by construction;
every problem becomes one sentence naming the file and the field."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Union, get_args

import yaml
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from testbed.fabrics.all_kinds import SECTIONS, kind_specific_fields
from testbed.fabrics.elect_cluster.section import ElectClusterFabric
from testbed.fabrics.elect_fattree.section import ElectFattreeFabric
from testbed.fabrics.elect_flat.section import ElectFlatFabric
from testbed.fabrics.ina.section import InaFabric
from testbed.fabrics.ps.section import PsFabric
from testbed.fabrics.sip_ocs.section import SipOcsFabric
from testbed.fabrics.sip_ring.section import SipRingFabric
from testbed.model.errors import InputError
from testbed.model.fabric_section import FabricSection
from testbed.model.scenario import Scenario, ScenarioOf

AnyFabric = Annotated[Union[ElectFlatFabric, ElectClusterFabric, ElectFattreeFabric, PsFabric, SipOcsFabric,
                            SipRingFabric, InaFabric], Field(discriminator="kind")]
ScenarioFile = ScenarioOf[AnyFabric]
_FABRIC = TypeAdapter(AnyFabric)
assert set(get_args(get_args(AnyFabric)[0])) == set(SECTIONS.values()), "AnyFabric must list every registered kind"

# Fields that only mean something for some fabric kinds; setting one elsewhere is a mistake we name.
KIND_SPECIFIC_FIELDS = kind_specific_fields()


def _is_tag(part: Any, previous: Any) -> bool:
    """pydantic puts union-branch tags in loc (e.g. 'float', "literal['auto']", a fabric's kind)."""
    return isinstance(part, str) and ("[" in part or part in {"float", "int"} or
                                      (previous == "fabric" and part in SECTIONS))


def _fields_only(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(p for i, p in enumerate(loc) if not _is_tag(p, loc[i - 1] if i else None))


def _field_path(loc: tuple[Any, ...]) -> str:
    # a key the user typed may hold anything: show control characters escaped, on one line
    return ".".join(p if p.isprintable() else repr(p)[1:-1] for p in map(str, _fields_only(loc)))


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose field the last part of `loc` is (a fabric's section by the kind in loc)."""
    model: type[BaseModel] = ScenarioFile
    for i, part in enumerate(loc[:-1]):
        if part == "fabric" and i + 1 < len(loc) - 1 and loc[i + 1] in SECTIONS:
            model = SECTIONS[loc[i + 1]]
            continue
        if _is_tag(part, loc[i - 1] if i else None):
            continue
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        candidates = [a for a in getattr(annotation, "__args__", (annotation,)) if isinstance(a, type)]
        models = [a for a in candidates if issubclass(a, BaseModel)]
        if not models:
            return None
        model = models[0]
    return model


def describe_validation_error(error: ValidationError, source: str) -> str:
    """Turn pydantic's report into one sentence naming the file and the field, then every other
    problem after it."""
    # A misspelt field also shows up as the missing real one: report the misspelling first.
    errors = sorted(error.errors(), key=lambda e: e["type"] != "extra_forbidden")
    first = _describe(errors[0], source)
    others = [_describe(e, source).removeprefix(f"{source}: ") for e in errors[1:]]
    if not others:
        return first
    return f"{first}; {len(others)} more problem{'s' if len(others) > 1 else ''}: " + "; ".join(others)


def _describe(first: Any, source: str) -> str:
    loc = tuple(first["loc"])
    where = _field_path(loc) or "(top level)"
    more = ""
    if first["type"] == "extra_forbidden":
        field = str(loc[-1])
        kind = next((p for p in loc if isinstance(p, str) and p in SECTIONS), None)
        owners = KIND_SPECIFIC_FIELDS.get(field)
        if kind is not None and owners:
            return f"{source}: fabric: field '{field}' applies only to kind {' or '.join(owners)}, not {kind}{more}"
        model = _model_at(loc)
        known = list(model.model_fields) if model is not None else []
        close = difflib.get_close_matches(field, known, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"allowed fields here: {', '.join(known)}"
        return f"{source}: unknown field '{where}'; {hint}{more}"
    if first["type"] == "union_tag_invalid":
        got = str(first.get("ctx", {}).get("tag", first.get("input")))
        close = difflib.get_close_matches(got, list(SECTIONS), n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"kinds: {', '.join(SECTIONS)}"
        return f"{source}: {where}.kind: unknown fabric kind '{got}'; {hint}{more}"
    if first["type"] in ("missing", "union_tag_not_found"):
        missing = f"{where}.kind" if first["type"] == "union_tag_not_found" else where
        return f"{source}: missing required field '{missing}'; add it{more}"
    message = first["msg"].removeprefix("Value error, ")
    got = first.get("input")
    got_text = "" if isinstance(got, (dict, list)) or got is None else f" (got {got!r})"
    if first["type"] == "value_error":
        return f"{source}: {where}: {message}{more}"
    return f"{source}: field '{where}': {message}{got_text}{more}"


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    if not isinstance(data, dict):
        raise InputError(f"{source}: a scenario must be a YAML mapping with name, fabric and workload")
    try:
        return ScenarioFile.model_validate(data)
    except ValidationError as error:
        raise InputError(describe_validation_error(error, source)) from None


def make_fabric(source: str = "<fabric>", **fields: Any) -> FabricSection:
    """One fabric section from its fields (as a scenario's `fabric` mapping holds them)."""
    try:
        return _FABRIC.validate_python(fields)
    except ValidationError as error:
        message = describe_validation_error(error, source)
        raise InputError(message.replace(f"{source}: field '", f"{source}: field 'fabric.")) from None


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int) -> None:
        super().__init__(key, line)
        self.key, self.line = key, line


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's own loader keeps the last of two equal keys; a scenario with both is a mistake."""


def _unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
        if key in seen:
            raise _DuplicateKey(key, key_node.start_mark.line + 1)
        seen.add(key)
    return dict(loader.construct_mapping(node, deep=deep))


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; every problem becomes an InputError."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such scenario file; check the path")
    try:
        data = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except _DuplicateKey as duplicate:
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


def override_applies(key: str, kind: str) -> bool:
    """Whether an override key applies to a fabric of `kind`: a `<kind>:<field>` key only to that kind."""
    prefix, sep, _ = key.rpartition(":")
    if sep and prefix not in SECTIONS:
        raise InputError(f"override {key}: {prefix!r} is not a fabric kind ({', '.join(SECTIONS)})")
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
    if isinstance(new_kind, str) and new_kind != scenario.fabric.kind and new_kind in SECTIONS:
        data["fabric"] = {k: v for k, v in data["fabric"].items() if k in SECTIONS[new_kind].model_fields}
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


def scenario_to_yaml(scenario: Scenario, resolved: dict[str, Any] | None = None) -> str:
    """The scenario with every default filled in (and `resolved` emulation values); it re-validates."""
    data = scenario.model_dump(mode="json", exclude_none=True)
    if resolved:
        data["emulation"].update(resolved)
    return str(yaml.safe_dump(data, sort_keys=False))

"""Pydantic's report on a scenario as one sentence naming the file and the field: fields of another
kind's section (fabric or workload) say which kinds they belong to, a misspelt field the closest
real one."""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from testbed.fabrics.all_kinds import SECTIONS as FABRIC_SECTIONS
from testbed.model.fabric_section import COMMON_FIELDS
from testbed.model.limits import BOUND_WHY
from testbed.model.workload_section import WorkloadSection
from testbed.workloads.all_kinds import SECTIONS as WORKLOAD_SECTIONS

# A discriminated section's field name -> its kinds' sections, by the tag pydantic puts in loc.
TAGGED: dict[str, dict[str, type[BaseModel]]] = {"fabric": dict(FABRIC_SECTIONS),
                                                  "workload": dict(WORKLOAD_SECTIONS)}


def _section_fields(sections: dict[str, type[BaseModel]], common: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    owners: dict[str, tuple[str, ...]] = {}
    for name, section in sections.items():
        for field in section.model_fields:
            if field not in common:
                owners[field] = owners.get(field, ()) + (name,)
    return owners


# Fields that only mean something for some kinds; setting one elsewhere is a mistake we name.
KIND_SPECIFIC_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "fabric": _section_fields(TAGGED["fabric"], COMMON_FIELDS),
    "workload": _section_fields(TAGGED["workload"], tuple(WorkloadSection.model_fields)),
}


def _is_tag(part: Any, previous: Any) -> bool:
    """pydantic puts union-branch tags in loc (e.g. 'float', "literal['auto']", a fabric's or a
    workload's kind)."""
    return isinstance(part, str) and ("[" in part or part in {"float", "int"} or
                                      (previous in TAGGED and part in TAGGED[previous]))


def _fields_only(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(p for i, p in enumerate(loc) if not _is_tag(p, loc[i - 1] if i else None))


def _field_path(loc: tuple[Any, ...]) -> str:
    # a key the user typed may hold anything: show control characters escaped, on one line
    return ".".join(p if p.isprintable() else repr(p)[1:-1] for p in map(str, _fields_only(loc)))


def _model_at(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose field the last part of `loc` is (a section by the kind in loc)."""
    model: type[BaseModel] = root
    for i, part in enumerate(loc[:-1]):
        if part in TAGGED and i + 1 < len(loc) - 1 and loc[i + 1] in TAGGED[part]:
            model = TAGGED[part][loc[i + 1]]
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


def describe_validation_error(error: ValidationError, source: str, root: type[BaseModel]) -> str:
    """Turn pydantic's report on a `root` model into one sentence naming the file and the field,
    then every other problem after it."""
    # A misspelt field also shows up as the missing real one: report the misspelling first.
    errors = sorted(error.errors(), key=lambda e: e["type"] != "extra_forbidden")
    first = _describe(errors[0], source, root)
    others = [_describe(e, source, root).removeprefix(f"{source}: ") for e in errors[1:]]
    if not others:
        return first
    return f"{first}; {len(others)} more problem{'s' if len(others) > 1 else ''}: " + "; ".join(others)


def _section_of(loc: tuple[Any, ...]) -> tuple[str, str] | None:
    """The tagged section (fabric or workload) and its kind that `loc` lies in, if any."""
    for i, part in enumerate(loc[:-1]):
        if part in TAGGED and isinstance(loc[i + 1], str) and loc[i + 1] in TAGGED[part]:
            return str(part), str(loc[i + 1])
    return None


def _describe(first: Any, source: str, root: type[BaseModel]) -> str:
    loc = tuple(first["loc"])
    where = _field_path(loc) or "(top level)"
    more = ""
    if first["type"] == "extra_forbidden":
        field = str(loc[-1])
        # the unknown key is the user's own, whatever it looks like (a key "a[0]" is no union tag)
        key = field if field.isprintable() else repr(field)[1:-1]
        where = ".".join(part for part in (_field_path(loc[:-1]), key) if part)
        section = _section_of(loc)
        owners = KIND_SPECIFIC_FIELDS[section[0]].get(field) if section else None
        if section is not None and owners and section[1] not in owners and loc[-2] == section[1]:
            return (f"{source}: {section[0]}: field '{field}' applies only to kind {' or '.join(owners)}, "
                    f"not {section[1]}{more}")
        model = _model_at(root, loc)
        known = list(model.model_fields) if model is not None else []
        close = difflib.get_close_matches(field, known, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"allowed fields here: {', '.join(known)}"
        return f"{source}: unknown field '{where}'; {hint}{more}"
    if first["type"] == "union_tag_invalid":
        got = str(first.get("ctx", {}).get("tag", first.get("input")))
        which = str(_fields_only(loc)[-1]) if _fields_only(loc) else "fabric"
        kinds = list(TAGGED.get(which, TAGGED["fabric"]))
        close = difflib.get_close_matches(got, kinds, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"kinds: {', '.join(kinds)}"
        return f"{source}: {where}.kind: unknown {which} kind {got!r}; {hint}{more}"
    if first["type"] in ("missing", "union_tag_not_found"):
        missing = f"{where}.kind" if first["type"] == "union_tag_not_found" else where
        return f"{source}: missing required field '{missing}'; add it{more}"
    message = first["msg"].removeprefix("Value error, ")
    got = first.get("input")
    got_text = "" if isinstance(got, (dict, list)) or got is None else f" (got {_short(repr(got))})"
    named = NAMED_FIELD.match(message)
    if first["type"] == "value_error" and named:  # a section's own check naming one of its fields
        field = named["field"] if where == "(top level)" else f"{where}.{named['field']}"
        return f"{source}: {field}: {named['rest']}{more}"
    if first["type"] == "value_error":
        return f"{source}: {where}: {message}{more}"
    if first["type"] in ("less_than_equal", "less_than") and str(loc[-1]) in BOUND_WHY:
        message = f"{message} ({BOUND_WHY[str(loc[-1])]})"
    return f"{source}: field '{where}': {message}{got_text}{more}"


NAMED_FIELD = re.compile(r"^'(?P<field>\w+)': (?P<rest>.*)$", re.DOTALL)
ECHOED_CHARS = 80  # what an error quotes of a value (a 10,000-character name quoted whole buried the sentence)


def _short(text: str) -> str:
    return text if len(text) <= ECHOED_CHARS else f"{text[:ECHOED_CHARS - 20]}... ({len(text):,} characters)"

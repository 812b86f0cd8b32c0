"""The scenario file's field reference, made from the models themselves: every section and every
fabric and workload kind's fields with their type, default, bounds and meaning (the comment beside or above the
field in its model), as Markdown (docs/scenario.md) and as a JSON schema for editors."""

from __future__ import annotations

import inspect
import io
import json
import tokenize
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from testbed.fabrics.all_kinds import SECTIONS
from testbed.model.fabric_section import COMMON_FIELDS, FabricSection
from testbed.model.scenario import Emulation, Fault, Job
from testbed.model.workload_section import WorkloadSection
from testbed.planning.scenario_file import ScenarioFile
from testbed.workloads.all_kinds import SECTIONS as WORKLOAD_SECTIONS
from testbed.workloads.llm.section import LlmDevice, LlmModel, LlmParallelism
from testbed.workloads.model.section import PlacedModel

WORKLOAD_COMMON_FIELDS = tuple(WorkloadSection.model_fields)

HEADER = """# Scenario file reference

Generated from the models by `testbed schema --markdown` (a test fails when this file and the
models differ); `testbed schema` prints the JSON schema that editors use to check and complete a
scenario file. Units are in the names (`_gbps`, `_us`, `_ms`, `_s`, `_bytes`, `_frac`); a field
without a default must be given. `testbed check FILE` validates a file against all of this.
"""

# Sections of a scenario file, in the order a file is usually written: (heading, model, path).
SECTIONS_IN_ORDER: tuple[tuple[str, type[BaseModel], str], ...] = (
    ("Top level", ScenarioFile, ""),
    ("`workload.model` (kind model)", PlacedModel, "workload.model"),
    ("`workload.model` (kind llm)", LlmModel, "workload.model"),
    ("`workload.parallel` (kind llm)", LlmParallelism, "workload.parallel"),
    ("`workload.device` (kind llm)", LlmDevice, "workload.device"),
    ("`jobs[]` (several jobs on one fabric, instead of `workload`)", Job, "jobs[]"),
    ("`emulation`", Emulation, "emulation"),
    ("`faults[]`", Fault, "faults[]"),
)


def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """Each field's comment in the model's source (and its bases'): the one on its line, or the
    comment lines right above it."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            source = inspect.getsource(cls)
        except (OSError, TypeError):
            continue
        found.update(_comments_in(source, set(cls.__annotations__)))
    return found


def _comments_in(source: str, names: set[str]) -> dict[str, str]:
    lines = source.splitlines()
    comments: dict[int, str] = {}  # line number -> comment text
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
    out: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        name = stripped.split(":", 1)[0]
        if name not in names or line[: len(line) - len(line.lstrip())] != " " * 4:
            continue
        above: list[str] = []
        previous = number - 1
        while previous in comments and lines[previous - 1].strip().startswith("#"):
            above.insert(0, comments[previous])
            previous -= 1
        beside = comments.get(number) if not stripped.startswith("#") else None
        text = " ".join(above + ([beside] if beside else []))
        if text:
            out[name] = text
    return out


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{value}`" for value in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        parts = [_type_name(a) for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(dict.fromkeys(parts))
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (list, tuple):
        return f"list of {_type_name(typing.get_args(annotation)[0])}"
    if origin is dict:
        key, value = typing.get_args(annotation)
        return f"map of {_type_name(key)} to {_type_name(value)}"
    if isinstance(annotation, type) and issubclass(annotation, FabricSection):
        return "one kind's section (`fabric`)"
    if isinstance(annotation, type) and issubclass(annotation, WorkloadSection):
        return "one kind's section (`workload`)"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        path = next((p for _, m, p in SECTIONS_IN_ORDER if m is annotation or _generic_origin(m) is not None
                     and _generic_origin(m) is _generic_origin(annotation)), annotation.__name__)
        return f"section (`{path}`)"
    return getattr(annotation, "__name__", str(annotation)).replace("Annotated", "")


def _generic_origin(model: type[BaseModel]) -> Any:
    """The generic model a parametrised one was made from (JobOf for JobOf[...]), else None."""
    return getattr(model, "__pydantic_generic_metadata__", {}).get("origin")


def _bounds(info: FieldInfo) -> str:
    words = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    out = []
    for item in info.metadata:
        for key, sign in words.items():
            value = getattr(item, key, None)
            if value is not None:
                out.append(f"{sign} {value:,}" if isinstance(value, int) else f"{sign} {value}")
        pattern = getattr(item, "pattern", None)
        if pattern:
            out.append(f"matches `{pattern}`")
    return ", ".join(out)


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    default = info.get_default(call_default_factory=True)
    if default is None:
        return "unset"
    if isinstance(default, BaseModel):
        return "its defaults"
    if default == [] or default is PydanticUndefined:
        return "none"
    return f"`{default}`"


def _rows(model: type[BaseModel], only: set[str] | None = None) -> list[str]:
    comments = field_comments(model)
    rows = ["| field | type | default | bounds | meaning |", "| --- | --- | --- | --- | --- |"]
    for name, info in model.model_fields.items():
        if only is not None and name not in only:
            continue
        meaning = comments.get(name, "").replace("|", "\\|")
        rows.append(f"| `{name}` | {_type_name(info.annotation)} | {_default(info)} | {_bounds(info)} | {meaning} |")
    return rows


def reference_markdown() -> str:
    """docs/scenario.md."""
    parts = [HEADER]
    for heading, model, _ in SECTIONS_IN_ORDER[:1]:
        parts += [f"## {heading}", "", *_rows(model), ""]
    parts += ["## `fabric`", "", "Every kind has these fields; `kind` picks one of the kinds below, whose own fields "
              "follow. A field of another kind is an error that names the kinds it belongs to.", "",
              *_rows(FabricSection, set(COMMON_FIELDS) - {"kind"}), ""]
    for kind, section in SECTIONS.items():
        own = set(section.model_fields) - set(COMMON_FIELDS)
        parts += [f"### `kind: {kind}`", "", f"{section.spec.description[0].upper()}{section.spec.description[1:]}.",
                  ""]
        parts += [*_rows(section, own), ""] if own else ["No fields of its own.", ""]
    parts += ["## `workload`", "", "Every kind has these fields; `kind` picks one of the kinds below, whose own "
              "fields follow. A field of another kind is an error that names the kinds it belongs to.", "",
              *_rows(WorkloadSection, set(WORKLOAD_COMMON_FIELDS) - {"kind"}), ""]
    for kind, workload in WORKLOAD_SECTIONS.items():
        own = set(workload.model_fields) - set(WORKLOAD_COMMON_FIELDS)
        parts += [f"### `kind: {kind}`", "", f"{workload.description[0].upper()}{workload.description[1:]}.", ""]
        parts += [*_rows(workload, own), ""] if own else ["No fields of its own.", ""]
    for heading, model, _ in SECTIONS_IN_ORDER[1:]:
        parts += [f"## {heading}", "", *_rows(model), ""]
    return "\n".join(parts).rstrip() + "\n"


def undocumented_fields() -> list[str]:
    """Fields whose model gives no comment to explain them (the reference would show a blank)."""
    missing = []
    for _, model, path in SECTIONS_IN_ORDER:
        comments = field_comments(model)
        missing += [f"{path}.{name}".lstrip(".") for name in model.model_fields
                    if name not in comments and name != "fabric"]
    for kind, section in SECTIONS.items():
        comments = field_comments(section)
        missing += [f"fabric ({kind}).{name}" for name in section.model_fields
                    if name not in comments and name != "kind"]
    for kind, workload in WORKLOAD_SECTIONS.items():
        comments = field_comments(workload)
        missing += [f"workload ({kind}).{name}" for name in workload.model_fields
                    if name not in comments and name != "kind"]
    return missing


def json_schema() -> str:
    """The scenario file's JSON schema (draft 2020-12), for editors' completion and checking."""
    schema = ScenarioFile.model_json_schema()
    schema["title"] = "testbed scenario"
    # `jobs:` may stand instead of `workload:` (the file's reader turns it into the jobs workload).
    schema["required"] = [name for name in schema.get("required", []) if name != "workload"]
    models = [model for _, model, _ in SECTIONS_IN_ORDER] + list(SECTIONS.values()) + list(WORKLOAD_SECTIONS.values())
    described = {model.__name__: field_comments(model) for model in models}
    for name, node in [(ScenarioFile.__name__, schema), *schema.get("$defs", {}).items()]:
        comments = described.get(name, described[ScenarioFile.__name__] if node is schema else {})
        for field, prop in node.get("properties", {}).items():
            if field in comments:
                prop["description"] = comments[field]
    return json.dumps(schema, indent=1) + "\n"

"""Where user files enter: regular files only, bounded in size before they are read, UTF-8 text,
JSON bounded in depth; every failure one InputError sentence naming the file and what to give."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from testbed.model.errors import InputError

# The largest of each kind of file a user gives, far above any real one: a scenario is a few KB (a
# thousand jobs about 100 KB), a run's results a few MB, a JSON trace of a large model tens of MB.
SCENARIO_BYTES = 1_000_000
RECORD_BYTES = 200_000_000  # a run's or a sweep's own files (results, events, tables)
# JSON traces, op profiles, AICB workload files: a JSON trace takes about 14 times its size in
# memory once read, so 100 MB stays near 1.4 GB.
TRACE_BYTES = 100_000_000
# A Chakra trace, all its ranks' .et files together: protobuf nodes take about 85 times their size
# in memory as steps, so 20 MB stays under 2 GB.
CHAKRA_TRACE_BYTES = 20_000_000
# Python's JSON decoder recurses once per level; a file nested this deep is not a trace or a record.
MAX_JSON_DEPTH = 200


def _where(path: Path, given_as: str | None) -> str:
    return f"{given_as}: {path}" if given_as else str(path)


def read_bytes(path: str | Path, what: str, max_bytes: int, given_as: str | None = None) -> bytes:
    """The file's bytes: a regular file (not a device, pipe or directory) of at most `max_bytes`.
    `what` names what the file should be ("a scenario's YAML file"), for the sentence."""
    path = Path(path)
    where = _where(path, given_as)
    try:
        info = path.stat()
    except OSError as error:
        raise InputError(f"{where}: cannot read it ({error.strerror or error}); give {what}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise InputError(f"{where}: {kind}; give {what}")
    if info.st_size > max_bytes:
        raise InputError(f"{where}: {info.st_size:,} bytes is more than {what} holds (at most {max_bytes:,}); "
                         f"check the path")
    try:
        with path.open("rb") as source:
            data = source.read(max_bytes + 1)  # a file that grew since stat is still bounded
    except OSError as error:
        raise InputError(f"{where}: cannot read it ({error.strerror or error}); give {what}") from None
    if len(data) > max_bytes:
        raise InputError(f"{where}: more than {max_bytes:,} bytes, more than {what} holds; check the path")
    return data


def read_text(path: str | Path, what: str, max_bytes: int, given_as: str | None = None) -> str:
    """The file's text, UTF-8 (a byte-order mark allowed), as read_bytes bounds it."""
    data = read_bytes(path, what, max_bytes, given_as)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{_where(Path(path), given_as)}: not UTF-8 text (byte {error.start} cannot be read); "
                         f"give {what}, saved as UTF-8") from None


def json_depth(text: str) -> int:
    """The deepest nesting of brackets outside strings (a bound checked before parsing)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def parse_json(text: str, where: str, what: str, finite: bool = True) -> Any:
    """JSON text as Python values; too deep or malformed refused, and NaN and Infinity unless
    `finite` is False (a run's own records may hold them)."""
    # Quick test first: brackets at all deeper than the bound need a scan (the scan is linear).
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and json_depth(text) > MAX_JSON_DEPTH:
        raise InputError(f"{where}: nested too deeply to read (over {MAX_JSON_DEPTH} levels); {what} is a few "
                         f"levels deep")
    try:
        return json.loads(text, parse_constant=_no_constant) if finite else json.loads(text)
    except _NonFinite as error:
        raise InputError(f"{where}: {error.args[0]} is not a number a file can hold; give finite numbers") from None
    except ValueError as error:
        raise InputError(f"{where}: not JSON ({str(error).splitlines()[0][:120]}); give {what}") from None
    except RecursionError:
        raise InputError(f"{where}: nested too deeply to read; {what} is a few levels deep") from None


class _NonFinite(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NonFinite(name)  # NaN, Infinity, -Infinity: JSON has no such numbers; Python writes them


def read_json(path: str | Path, what: str, max_bytes: int, given_as: str | None = None, finite: bool = True) -> Any:
    """A JSON file's value, read and parsed within the bounds above."""
    return parse_json(read_text(path, what, max_bytes, given_as), _where(Path(path), given_as), what, finite)


def read_json_lines(path: str | Path, what: str, max_bytes: int, finite: bool = True) -> list[Any]:
    """A JSON-lines file's values (blank lines skipped), each line as parse_json bounds it."""
    path = Path(path)
    return [parse_json(line, f"{path} line {number}", what, finite)
            for number, line in enumerate(read_text(path, what, max_bytes).splitlines(), 1) if line.strip()]

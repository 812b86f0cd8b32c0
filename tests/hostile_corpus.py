"""A corpus of hostile inputs, by kind: scenario values, scenario files, JSON traces, Chakra traces,
op profiles, command-line misuse, damaged run and sweep directories, the Python API. Each case is
run as a user would (the CLI's `main`, or the API) and judged: one sentence and exit 2 where it is
refused, a finite figure where it is accepted, `check` refusing what `predict` refuses, no
traceback, no hang. Used by tests/unit/test_hostile_corpus.py and bench/hostile_corpus.py."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import re
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
HANG_S = 60  # what the issue calls a hang; no case may take longer
REFUSE, EITHER = "refuse", "either"


@dataclass(frozen=True)
class Case:
    kind: str
    name: str
    setup: Callable[[Path], list[str] | Callable[[], Any]]  # writes files in a fresh directory; the argv or call
    expect: str = REFUSE  # REFUSE: exit 2 with one sentence; EITHER: refused or a sane answer
    also_predict: bool = False  # a scenario: `check` and `predict` both run, and must agree


@dataclass
class Outcome:
    status: str  # clean, traceback, hang, wrong, unclear
    detail: str = ""
    seconds: float = 0.0
    codes: list[int] = field(default_factory=list)


# ---- running a case ----------------------------------------------------------------------------

class _Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Hang()


def _cli(argv: list[str]) -> tuple[int, str, str]:
    from testbed.interface.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse's usage errors
            code = exit_.code if isinstance(exit_.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _sentence(err: str) -> bool:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    if not lines or "Traceback" in err:
        return False
    if lines[0].startswith("usage:"):  # argparse: the usage, then one error line
        return lines[-1].startswith("testbed") and "error:" in lines[-1]
    return len(lines) == 1 and lines[0].startswith("error:") and len(lines[0]) < 2000


FIGURE = re.compile(r"predicted iteration time ([-\w.+]+) ms")


def _judge_cli(case: Case, argv: list[str]) -> Outcome:
    runs = [argv] + ([["predict", *argv[1:]]] if case.also_predict else [])
    codes, details = [], []
    for args in runs:
        code, out, err = _cli(args)
        codes.append(code)
        if code == 2:
            if not _sentence(err):
                return Outcome("unclear", f"{args[0]}: {err.strip()[:300]!r}", codes=codes)
            details.append(err.strip()[:200])
        elif code == 0:
            if args[0] == "predict":
                found = FIGURE.search(out)
                if not found or not math.isfinite(float(found[1])) or float(found[1]) <= 0:
                    return Outcome("wrong", f"predict answered {out.strip()[:200]!r}", codes=codes)
            details.append(out.strip().splitlines()[0][:200] if out.strip() else "")
        else:
            return Outcome("unclear", f"{args[0]} exit {code}: {err.strip()[:300]!r}", codes=codes)
    if len(set(codes)) > 1:
        return Outcome("wrong", f"check and predict disagree ({codes}): {details}", codes=codes)
    if codes[0] == 0 and case.expect == REFUSE:
        return Outcome("wrong", f"accepted: {details[0]}", codes=codes)
    return Outcome("clean", details[0] if details else "", codes=codes)


def _judge_call(case: Case, call: Callable[[], Any]) -> Outcome:
    from testbed.model.errors import InputError

    try:
        value = call()
    except InputError as error:
        text = str(error)
        if "\n" in text or not text:
            return Outcome("unclear", text[:300])
        return Outcome("clean", text[:200])
    if case.expect == REFUSE:
        return Outcome("wrong", f"accepted: {str(value)[:200]}")
    return Outcome("clean", str(value)[:200])


def run_case(case: Case, work: Path) -> Outcome:
    """The case's outcome, its files made under `work` (a fresh directory); any exception other
    than InputError is a traceback."""
    cwd = os.getcwd()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_S)
    started = time.monotonic()
    try:
        os.chdir(work)
        made = case.setup(work)
        outcome = _judge_cli(case, made) if isinstance(made, list) else _judge_call(case, made)
    except _Hang:
        outcome = Outcome("hang", f"over {HANG_S} s")
    except Exception as error:  # noqa: BLE001 (the corpus counts what escapes)
        outcome = Outcome("traceback", f"{type(error).__name__}: {str(error)[:200]}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        os.chdir(cwd)
    outcome.seconds = time.monotonic() - started
    return outcome


# ---- building cases ----------------------------------------------------------------------------

def _base(name: str) -> dict:
    return yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())


def _set(data: dict, dotted: str, value: Any) -> dict:
    data = copy.deepcopy(data)
    node: Any = data
    *parents, leaf = dotted.split(".")
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if value is _DELETE:
        node.pop(leaf, None)
    else:
        node[int(leaf) if isinstance(node, list) else leaf] = value
    return data


_DELETE = object()


def _scenario_case(kind: str, name: str, data: dict | str, expect: str = REFUSE,
                   extra: Callable[[Path], None] | None = None, command: str = "check") -> Case:
    def setup(work: Path) -> list[str]:
        if extra is not None:
            extra(work)
        path = work / "s.yaml"
        if isinstance(data, str):
            path.write_text(data)
        else:
            path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        return [command, str(path)]
    return Case(kind, name, setup, expect, also_predict=command == "check")


NUMBER_VALUES: list[tuple[str, Any]] = [
    ("nan", float("nan")), ("inf", float("inf")), ("-inf", float("-inf")), ("1e308", 1e308),
    ("10**400", 10**400), ("text", "abc"), ("markup", "[/red]"), ("list", [1]), ("mapping", {"a": 1}),
    ("bool", True), ("negative", -1),
]
# Scenario fields and whether 0 (and null) is refused too: counts and rates must be positive.
NUMBER_FIELDS = {
    "quickstart": ["fabric.hosts", "fabric.gpu_bandwidth_gbps", "fabric.latency_us", "workload.bytes",
                   "workload.iterations", "seed", "emulation.dilation", "emulation.byte_scale"],
    "placed-resnet-ring": ["fabric.wavelengths", "fabric.reconfig_us", "fabric.estimate_period_us",
                           "workload.model.mp", "workload.model.dp", "workload.model.global_batch",
                           "workload.model.tau_us"],
    "llm-moe": ["workload.parallel.tp", "workload.parallel.pp", "workload.parallel.dp", "workload.parallel.ep",
                "workload.parallel.micro_batch", "workload.parallel.global_batch", "workload.model.layers",
                "workload.model.hidden", "workload.model.heads"],
    "two-jobs-ocs": ["fabric.ocs_switches", "jobs.0.gpus", "fabric.reconfig_us"],
    "ina-allreduce": ["fabric.slots", "fabric.aggregation_gbps", "fabric.node_drop_frac"],
}
ZERO_REFUSED = {"fabric.hosts", "fabric.gpu_bandwidth_gbps", "workload.bytes", "workload.iterations",
                "fabric.wavelengths", "fabric.estimate_period_us", "workload.model.mp", "workload.model.dp",
                "workload.model.global_batch", "workload.parallel.tp", "workload.parallel.pp",
                "workload.parallel.dp", "workload.parallel.ep", "workload.parallel.micro_batch",
                "workload.parallel.global_batch", "workload.model.layers", "workload.model.hidden",
                "workload.model.heads", "fabric.ocs_switches", "jobs.0.gpus", "fabric.slots",
                "fabric.aggregation_gbps"}
NAME_FIELDS = {
    "quickstart": ["fabric.kind", "workload.kind", "workload.collective", "workload.algorithm"],
    "placed-resnet-ring": ["workload.model.name"],
    "llm-moe": ["workload.model.preset", "workload.precision", "workload.device", "workload.parallel.schedule"],
    "two-jobs-ocs": ["job_sharing"],
}
NAME_VALUES: list[tuple[str, Any]] = [("unknown", "warp-drive"), ("markup", "[/red]"), ("empty", ""),
                                      ("number", 7), ("list", ["ring"]), ("control", "ring\x00\x1b[31m")]


def scenario_value_cases() -> list[Case]:
    cases = []
    for base, fields in NUMBER_FIELDS.items():
        data = _base(base)
        for dotted in fields:
            values = NUMBER_VALUES + ([("zero", 0)] if dotted in ZERO_REFUSED else [])
            for label, value in values:
                if dotted == "seed" and label == "negative":
                    continue  # any integer seeds the generator
                cases.append(_scenario_case("scenario values", f"{base}:{dotted}={label}",
                                            _set(data, dotted, value)))
    for base, fields in NAME_FIELDS.items():
        data = _base(base)
        for dotted in fields:
            for label, value in NAME_VALUES:
                cases.append(_scenario_case("scenario values", f"{base}:{dotted}={label}",
                                            _set(data, dotted, value)))
    quick = _base("quickstart")
    cases += [
        _scenario_case("scenario values", "unknown top-level key", {**quick, "fabrik": {"hosts": 2}}),
        _scenario_case("scenario values", "unknown key with a bracket", _set(quick, "fabric.hosts[0]", 2)),
        _scenario_case("scenario values", "a model section under a collective", _set(quick, "workload.model",
                                                                                     {"name": "resnet50"})),
        _scenario_case("scenario values", "path on a collective", _set(quick, "workload.path", "x")),
        _scenario_case("scenario values", "no fabric", {k: v for k, v in quick.items() if k != "fabric"}),
        _scenario_case("scenario values", "no workload", {k: v for k, v in quick.items() if k != "workload"}),
        _scenario_case("scenario values", "fabric is a list", {**quick, "fabric": [1, 2]}),
        _scenario_case("scenario values", "bytes as 1e9 float", _set(quick, "workload.bytes", 1e9), EITHER),
        _scenario_case("scenario values", "bytes written 1e9", _set(quick, "workload.bytes", "1e9"), EITHER),
        _scenario_case("scenario values", "bytes written 1.5", _set(quick, "workload.bytes", 1.5)),
        _scenario_case("scenario values", "a huge list echoed", _set(quick, "fabric.hosts", list(range(200_000)))),
        _scenario_case("scenario values", "name markup accepted", {**quick, "name": "[/red]"}, EITHER),
        _scenario_case("scenario values", "name of 10,000 characters", {**quick, "name": "x" * 10_000}),
        _scenario_case("scenario values", "gpu_bandwidth_gbps 100e9", _set(quick, "fabric.gpu_bandwidth_gbps", 100e9)),
        _scenario_case("scenario values", "wavelengths 10**9", _set(_base("placed-resnet-ring"),
                                                                     "fabric.wavelengths", 10**9)),
        _scenario_case("scenario values", "ocs_switches 100000", _set(_base("two-jobs-ocs"), "fabric.ocs_switches",
                                                                       100_000)),
        _scenario_case("scenario values", "INA loss 0.999999", _set(_base("ina-allreduce"), "fabric.node_drop_frac",
                                                                     0.999999)),
        _scenario_case("scenario values", "multi-shot SiP-OCS with no reconfiguration time",
                       _set(_set(_set(_set(_base("placed-resnet"), "fabric.kind", "sip-ocs"), "fabric.ocs_switches", 3),
                                 "fabric.reconfig_us", 0), "fabric.multi_shot", True), EITHER),
        _scenario_case("scenario values", "SiP-Ring with no reconfiguration time",
                       _set(_base("placed-resnet-ring"), "fabric.reconfig_us", 0), EITHER),
        _scenario_case("scenario values", "SiP-Ring B and wavelengths disagree",
                       _set(_base("placed-resnet-ring"), "fabric.wavelength_gbps", 7)),
        _scenario_case("scenario values", "mp × dp beyond the hosts", _set(_base("placed-resnet-ring"),
                                                                            "workload.model.mp", 8)),
        _scenario_case("scenario values", "resnet50 at mp 1024", {
            "name": "wide", "fabric": {"kind": "elect-flat", "hosts": 1024, "gpu_bandwidth_gbps": 100},
            "workload": {"kind": "model", "model": {"name": "resnet50", "mp": 1024, "dp": 1, "global_batch": 64}}},
            EITHER),
        _scenario_case("scenario values", "512 two-GPU jobs on 1,024 hosts", {
            "name": "many", "fabric": {"kind": "elect-flat", "hosts": 1024, "gpu_bandwidth_gbps": 100},
            "jobs": [{"name": f"j{i}", "gpus": 2, "workload": {"kind": "collective", "collective": "allreduce",
                                                              "bytes": 1000}} for i in range(512)]}, EITHER),
        _scenario_case("scenario values", "all-to-all on SiP-Ring", _set(_set(quick, "fabric", {
            "kind": "sip-ring", "hosts": 8, "gpu_bandwidth_gbps": 100, "wavelengths": 4}),
            "workload.collective", "alltoall"), EITHER),
        _scenario_case("scenario values", "broadcast on SiP-OCS", _set(_set(quick, "fabric", {
            "kind": "sip-ocs", "hosts": 8, "gpu_bandwidth_gbps": 100, "ocs_switches": 2}),
            "workload.collective", "broadcast"), EITHER),
        _scenario_case("scenario values", "degree 1 on Megatron", {
            "name": "deg", "fabric": {"kind": "elect-flat", "hosts": 8, "gpu_bandwidth_gbps": 100},
            "workload": {"kind": "model", "model": {"name": "megatron", "mp": 8, "dp": 1, "global_batch": 8,
                                                     "degree": 1}}}, EITHER),
    ]
    return cases


def _file(name: str, write: Callable[[Path], None], expect: str = REFUSE) -> Case:
    def setup(work: Path) -> list[str]:
        path = work / "s.yaml"
        write(path)
        return ["check", str(path)]
    return Case("scenario files", name, setup, expect, also_predict=True)


def _deep_yaml(levels: int) -> str:
    return "fabric: " + "{a: " * levels + "1" + "}" * levels + "\n"


def _laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]")
    return "\n".join(lines) + "\nname: *i\nfabric: {kind: elect-flat, hosts: *i, gpu_bandwidth_gbps: 100}\n"


def scenario_file_cases() -> list[Case]:
    text = (SCENARIOS / "quickstart.yaml").read_text()

    def symlink(target: str) -> Callable[[Path], None]:
        return lambda path: path.symlink_to(target)
    return [
        _file("utf-16", lambda p: p.write_text(text, encoding="utf-16")),
        _file("utf-32", lambda p: p.write_text(text, encoding="utf-32")),
        _file("latin-1 é in the name", lambda p: p.write_bytes(text.replace("quickstart", "qé").encode("latin-1"))),
        _file("utf-8 with a byte-order mark", lambda p: p.write_bytes(b"\xef\xbb\xbf" + text.encode()), EITHER),
        _file("empty", lambda p: p.write_text("")),
        _file("only a document marker", lambda p: p.write_text("---\n")),
        _file("a list", lambda p: p.write_text("- 1\n- 2\n")),
        _file("a scalar", lambda p: p.write_text("hello\n")),
        _file("binary", lambda p: p.write_bytes(bytes(range(256)) * 8)),
        _file("NUL bytes", lambda p: p.write_bytes(b"\x00" * 1000)),
        _file("a symlink to /dev/zero", symlink("/dev/zero")),
        _file("a symlink to /dev/null", symlink("/dev/null")),
        _file("a symlink to a directory", symlink("/")),
        _file("a symlink loop", lambda p: (p.parent / "loop").symlink_to(p) or p.symlink_to(p.parent / "loop")),
        _file("a dangling symlink", symlink("/nonexistent/file.yaml")),
        _file("a FIFO", lambda p: os.mkfifo(p)),
        _file("2 MB of YAML", lambda p: p.write_text(text + "#" + "x" * 2_000_000 + "\n")),
        _file("a 10 MB list", lambda p: p.write_text("name: [" + "1," * 5_000_000 + "1]\n")),
        _file("3,000 levels deep", lambda p: p.write_text(_deep_yaml(3000))),
        _file("billion laughs", lambda p: p.write_text(_laughs())),
        _file("a duplicate key", lambda p: p.write_text(text + "seed: 2\n")),
        _file("tabs for indentation", lambda p: p.write_text(text.replace("  ", "\t"))),
        _file("unclosed bracket", lambda p: p.write_text(text + "extra: [1, 2\n")),
        _file("a YAML tag", lambda p: p.write_text(text.replace("seed: 1", "seed: !!python/object:os.system 1"))),
        _file("an unhashable key", lambda p: p.write_text(text + "? [1, 2]\n: 3\n")),
        _file("a mapping as key", lambda p: p.write_text(text + "? {a: 1}\n: 3\n")),
        _file("a date for a number", lambda p: p.write_text(text.replace("latency_us: 5", "latency_us: 2024-01-01"))),
        _file("a directory", lambda p: p.mkdir()),
        Case("scenario files", "a missing file", lambda w: ["check", str(w / "nothere.yaml")]),
        Case("scenario files", "the path is empty", lambda w: ["check", ""]),
    ]


def _sparse(path: Path, size: int) -> None:
    with path.open("r+b") as out:
        out.truncate(size)  # a hole: the size a reader sees, no bytes written


def _trace_scenario(work: Path, trace: str | bytes | None, link: str | None = None, sparse: int = 0) -> list[str]:
    path = work / "t.json"
    if sparse:
        path.touch()
        _sparse(path, sparse)
    elif link is not None:
        path.symlink_to(link)
    elif isinstance(trace, bytes):
        path.write_bytes(trace)
    elif trace is not None:
        path.write_text(trace)
    (work / "s.yaml").write_text(yaml.safe_dump({
        "name": "t", "fabric": {"kind": "elect-flat", "hosts": 2, "gpu_bandwidth_gbps": 100},
        "workload": {"kind": "trace", "trace": "t.json"}}))
    return ["check", str(work / "s.yaml")]


def _steps(rank0: list[dict], rank1: list[dict]) -> str:
    return json.dumps({"format": "testbed-schedule/1", "name": "t", "hosts": 2, "iterations": 1,
                       "gpus": [{"rank": 0, "steps": rank0}, {"rank": 1, "steps": rank1}]})


def _pair(size0: Any = 1000, size1: Any = 1000, compute: Any = 10.0, peer: Any = 1, **extra: Any) -> str:
    return _steps([{"id": "c", "kind": "compute", "compute_us": compute},
                   {"id": "s", "kind": "send", "peer": peer, "bytes": size0, "tag": "m", "deps": ["c"], **extra}],
                  [{"id": "r", "kind": "recv", "peer": 0, "bytes": size1, "tag": "m"}])


def _coll(size0: Any, size1: Any, op0: str = "allreduce", op1: str = "allreduce") -> str:
    return _steps([{"id": "a", "kind": "collective", "op": op0, "group": [0, 1], "bytes": size0}],
                  [{"id": "a", "kind": "collective", "op": op1, "group": [0, 1], "bytes": size1}])


def trace_cases() -> list[Case]:
    def case(name: str, trace: str | bytes | None, expect: str = REFUSE, link: str | None = None) -> Case:
        return Case("JSON traces", name, lambda w: _trace_scenario(w, trace, link), expect, also_predict=True)
    crossed = _steps([{"id": "a", "kind": "collective", "op": "allreduce", "group": [0, 1], "bytes": 10, "tag": "x"},
                      {"id": "b", "kind": "collective", "op": "allreduce", "group": [0, 1], "bytes": 10, "tag": "y",
                       "deps": ["a"]}],
                     [{"id": "b", "kind": "collective", "op": "allreduce", "group": [0, 1], "bytes": 10, "tag": "y"},
                      {"id": "a", "kind": "collective", "op": "allreduce", "group": [0, 1], "bytes": 10, "tag": "x",
                       "deps": ["b"]}])
    return [
        case("a valid two-step trace", _pair(), EITHER),
        case("NaN compute", _pair(compute="NaN").replace('"NaN"', "NaN")),
        case("Infinity compute", _pair(compute="X").replace('"X"', "Infinity")),
        case("compute 1e300", _pair(compute=1e300)),
        case("negative compute", _pair(compute=-5)),
        case("compute as text", _pair(compute="ten")),
        case("bytes 10**400", _pair(size0=10**400, size1=10**400)),
        case("bytes negative", _pair(size0=-5, size1=-5)),
        case("bytes zero", _pair(size0=0, size1=0)),
        case("bytes fractional", _pair(size0=1.5, size1=1.5)),
        case("bytes as text", _pair(size0="1e9", size1="1e9")),
        case("send and recv sizes disagree", _pair(size0=1000, size1=2000)),
        case("a peer out of range", _pair(peer=7)),
        case("a peer that is itself", _pair(peer=0)),
        case("a peer as text", _pair(peer="one")),
        case("an unknown step kind", _pair().replace('"compute"', '"teleport"', 1)),
        case("a dependency on nothing", _pair().replace('"deps": ["c"]', '"deps": ["nope"]')),
        case("a dependency cycle", _steps([{"id": "a", "kind": "compute", "compute_us": 1, "deps": ["b"]},
                                           {"id": "b", "kind": "compute", "compute_us": 1, "deps": ["a"]}],
                                          [{"id": "c", "kind": "compute", "compute_us": 1}])),
        case("a receive never sent (deadlock)", _steps([{"id": "c", "kind": "compute", "compute_us": 1}],
                                                       [{"id": "r", "kind": "recv", "peer": 0, "bytes": 10,
                                                         "tag": "m"}])),
        case("two ranks waiting on each other", _steps(
            [{"id": "r", "kind": "recv", "peer": 1, "bytes": 10, "tag": "b"},
             {"id": "s", "kind": "send", "peer": 1, "bytes": 10, "tag": "a", "deps": ["r"]}],
            [{"id": "r", "kind": "recv", "peer": 0, "bytes": 10, "tag": "a"},
             {"id": "s", "kind": "send", "peer": 0, "bytes": 10, "tag": "b", "deps": ["r"]}])),
        case("collective members disagree on size", _coll(1000, 2000)),
        case("collective members disagree on op", _coll(1000, 1000, "allreduce", "allgather")),
        case("a collective missing on one member", _steps(
            [{"id": "a", "kind": "collective", "op": "allreduce", "group": [0, 1], "bytes": 10}],
            [{"id": "c", "kind": "compute", "compute_us": 1}])),
        case("collectives in crossed order", crossed),
        case("duplicate step ids", _pair().replace('"id": "s"', '"id": "c"')),
        case("no steps at all", _steps([], [])),
        case("only zero compute", _steps([{"id": "c", "kind": "compute", "compute_us": 0}],
                                         [{"id": "c", "kind": "compute", "compute_us": 0}])),
        case("ranks missing", json.dumps({"format": "testbed-schedule/1", "name": "t", "hosts": 2, "gpus": []})),
        case("three ranks for two hosts", json.dumps({"format": "testbed-schedule/1", "name": "t", "hosts": 3,
                                                      "gpus": [{"rank": r, "steps": []} for r in range(3)]})),
        case("the wrong format", _pair().replace("testbed-schedule/1", "chakra/0")),
        case("a list", "[1, 2, 3]"),
        case("truncated", _pair()[:60]),
        case("empty", ""),
        case("not UTF-8", _pair().encode("utf-16")),
        case("nested 100,000 deep", "[" * 100_000 + "]" * 100_000),
        case("a symlink to /dev/zero", None, link="/dev/zero"),
        case("a symlink to a directory", None, link="/"),
        case("missing", None),
        Case("JSON traces", "a sparse 101 MB trace", lambda w: _trace_scenario(w, None, sparse=101_000_000),
             also_predict=True),
        case("10,000 steps of zero compute", _steps([{"id": f"c{i}", "kind": "compute", "compute_us": 0}
                                                     for i in range(10_000)], []), EITHER),
    ]


def _chakra(work: Path, damage: Callable[[Path], None], groups: str | bytes | None = None) -> list[str]:
    directory = work / "trace"
    shutil.copytree(SCENARIOS / "traces" / "chakra-3d", directory)
    damage(directory)
    workload: dict[str, Any] = {"kind": "chakra", "path": "trace"}
    if groups is not None:
        path = work / "groups.json"
        path.write_bytes(groups if isinstance(groups, bytes) else groups.encode())
        workload["comm_groups"] = "groups.json"
    (work / "s.yaml").write_text(yaml.safe_dump({
        "name": "c", "fabric": {"kind": "elect-flat", "hosts": 8, "gpu_bandwidth_gbps": 100}, "workload": workload}))
    return ["check", str(work / "s.yaml")]


def chakra_cases() -> list[Case]:
    rank = "tp2-pp2-dp2.3.et"

    def case(name: str, damage: Callable[[Path], None], groups: str | bytes | None = None,
             expect: str = REFUSE) -> Case:
        return Case("Chakra traces", name, lambda w: _chakra(w, damage, groups), expect, also_predict=True)

    def cut(keep: float) -> Callable[[Path], None]:
        def damage(d: Path) -> None:
            data = (d / rank).read_bytes()
            (d / rank).write_bytes(data[: int(len(data) * keep)])
        return damage

    def flip(at: float) -> Callable[[Path], None]:
        def damage(d: Path) -> None:
            data = bytearray((d / rank).read_bytes())
            where = int(len(data) * at)
            data[where] ^= 0xFF
            (d / rank).write_bytes(bytes(data))
        return damage
    return [
        case("the shipped trace", lambda d: None, expect=EITHER),
        case("one rank empty", lambda d: (d / rank).write_bytes(b"")),
        case("one rank cut to 1 byte", cut(0.0001)),
        case("one rank cut in half", cut(0.5)),
        case("one rank cut near the end", cut(0.97)),
        case("a length varint of 2**62", lambda d: (d / rank).write_bytes(b"\xff" * 8 + b"\x3f" + b"x" * 10)),
        case("random bytes", lambda d: (d / rank).write_bytes(os.urandom(4096))),
        case("a byte flipped early", flip(0.02), expect=EITHER),
        case("a byte flipped mid-way", flip(0.5), expect=EITHER),
        case("a rank missing", lambda d: (d / rank).unlink()),
        case("an extra rank", lambda d: shutil.copy(d / rank, d / "tp2-pp2-dp2.8.et")),
        case("a second prefix", lambda d: shutil.copy(d / rank, d / "other.0.et")),
        case("a rank that is a directory", lambda d: ((d / rank).unlink(), (d / rank).mkdir())),
        case("a rank that links to /dev/zero", lambda d: ((d / rank).unlink(), (d / rank).symlink_to("/dev/zero"))),
        case("no trace files", lambda d: [p.unlink() for p in d.glob("*.et")]),
        case("ranks of 21 MB together (sparse files)", lambda d: [_sparse(p, 2_700_000) for p in d.glob("*.et")]),
        case("comm groups not JSON", lambda d: None, "{1: [0, 1]"),
        case("comm groups not UTF-8", lambda d: None, '{"1": [0, 1]}'.encode("utf-16")),
        case("comm groups with a rank out of range", lambda d: None, '{"1": [0, 99]}'),
        case("comm groups with a repeated rank", lambda d: None, '{"1": [0, 0]}'),
        case("comm groups as a list", lambda d: None, "[[0, 1]]"),
        case("comm groups nested deep", lambda d: None, "[" * 50_000 + "]" * 50_000),
    ]


def _profile(work: Path, body: Any, raw: str | None = None) -> list[str]:
    path = work / "p.yaml"
    path.write_text(raw if raw is not None else yaml.safe_dump(body))
    (work / "s.yaml").write_text(yaml.safe_dump({
        "name": "p", "fabric": {"kind": "elect-flat", "hosts": 4, "gpu_bandwidth_gbps": 100},
        "workload": {"kind": "model", "model": {"profile": "p.yaml", "name": "mine", "mp": 2, "dp": 2,
                                                "global_batch": 8}}}))
    return ["check", str(work / "s.yaml")]


def profile_cases() -> list[Case]:
    def op(name: str, **fields: Any) -> dict:
        return {"name": name, "kind": "conv", "compute_us_per_sample": 10.0, "output_bytes": 1000,
                "parameter_bytes": 100, **fields}
    good = {"name": "mine", "batch": 8, "ops": [op("a"), op("b", deps=["a"])]}

    def case(name: str, body: Any = None, raw: str | None = None, expect: str = REFUSE) -> Case:
        return Case("op profiles", name, lambda w: _profile(w, body, raw), expect, also_predict=True)

    def with_op(**fields: Any) -> dict:
        return {**good, "ops": [op("a"), op("b", **{"deps": ["a"], **fields})]}
    return [
        case("a valid profile", good, expect=EITHER),
        case("negative compute", with_op(compute_us_per_sample=-1.0)),
        case("NaN compute", with_op(compute_us_per_sample=float("nan"))),
        case("infinite compute", with_op(compute_us_per_sample=float("inf"))),
        case("compute 1e300", with_op(compute_us_per_sample=1e300)),
        case("negative output bytes", with_op(output_bytes=-1)),
        case("output bytes 10**400", with_op(output_bytes=10**400)),
        case("an unknown op kind", with_op(kind="teleport")),
        case("a dependency on an undefined op", with_op(deps=["zzz"])),
        case("an op defined twice", {**good, "ops": [op("a"), op("a")]}),
        case("no ops", {**good, "ops": []}),
        case("ops as a mapping", {**good, "ops": {"a": 1}}),
        case("batch zero", {**good, "batch": 0}),
        case("a list", raw="- 1\n"),
        case("not YAML", raw="ops: [1, 2\n"),
    ]


def _cli_case(name: str, argv: Callable[[Path], list[str]], expect: str = REFUSE) -> Case:
    return Case("command line", name, argv, expect)


def cli_cases() -> list[Case]:
    quick = str(SCENARIOS / "quickstart.yaml")
    placer = str(SCENARIOS / "placer-example.yaml")

    def swept(w: Path, *sets: str) -> list[str]:
        return ["sweep", quick, "--predict-only", "--out", str(w / "sw"), *(x for one in sets for x in ("--set", one))]

    def afile(w: Path) -> str:
        (w / "f").write_text("x")
        return str(w / "f")
    return [
        _cli_case("no command", lambda w: []),
        _cli_case("an unknown command", lambda w: ["teleport"]),
        _cli_case("check without a file", lambda w: ["check"]),
        _cli_case("an unknown flag", lambda w: ["predict", quick, "--frobnicate"]),
        _cli_case("--set on predict", lambda w: ["predict", quick, "--set", "fabric.hosts=4"]),
        _cli_case("--set of 1e9 bytes", lambda w: swept(w, "workload.bytes=1e9,2e9"), EITHER),
        _cli_case("--set of 100e9 Gb/s", lambda w: swept(w, "fabric.gpu_bandwidth_gbps=100e9")),
        _cli_case("--set of true for hosts", lambda w: swept(w, "fabric.hosts=true")),
        _cli_case("--set of hosts beyond the fabric's bound", lambda w: swept(w, "fabric.hosts=99999")),
        _cli_case("--set without =", lambda w: swept(w, "fabric.hosts")),
        _cli_case("--set of an unknown field", lambda w: swept(w, "fabric.warp=3")),
        _cli_case("--set of a bracketed key", lambda w: swept(w, "fabric[0].hosts=3")),
        _cli_case("--set of NaN", lambda w: swept(w, "fabric.gpu_bandwidth_gbps=nan")),
        _cli_case("--set of inf", lambda w: swept(w, "fabric.latency_us=inf")),
        _cli_case("--set of markup", lambda w: swept(w, "name=[/red]"), EITHER),
        _cli_case("--set of a YAML bomb", lambda w: swept(w, "name=" + "[" * 5000)),
        _cli_case("--set of an empty path", lambda w: swept(w, "=3")),
        _cli_case("--set into a scalar", lambda w: swept(w, "seed.x=3")),
        _cli_case("place --out at a file", lambda w: ["place", placer, "--out", afile(w)]),
        _cli_case("place --out under a file", lambda w: ["place", placer, "--out", afile(w) + "/sub"]),
        _cli_case("place --out in /proc", lambda w: ["place", placer, "--out", "/proc/testbed-out"]),
        _cli_case("export-chakra --out at a file", lambda w: ["export-chakra", quick, "--out", afile(w)]),
        _cli_case("sweep --out at a file", lambda w: ["sweep", quick, "--predict-only", "--set",
                                                      "workload.bytes=1000,2000", "--out", afile(w)]),
        _cli_case("sweep --set of nothing", lambda w: ["sweep", quick, "--predict-only", "--set",
                                                       "workload.bytes=", "--out", str(w / "sw")]),
        _cli_case("sweep --set of a bad value", lambda w: ["sweep", quick, "--predict-only", "--set",
                                                           "workload.bytes=-1,2", "--out", str(w / "sw")]),
        _cli_case("compare --plot at a directory", lambda w: ["compare", quick, quick, "--plot", str(w)]),
        _cli_case("compare --plot under a file", lambda w: ["compare", quick, quick, "--plot", afile(w) + "/x.png"]),
        _cli_case("compare of a missing scenario", lambda w: ["compare", quick, str(w / "nothere.yaml")]),
        _cli_case("report of a missing directory", lambda w: ["report", str(w / "nothere")]),
        _cli_case("report of a file", lambda w: ["report", afile(w)]),
        _cli_case("report --out at a file", lambda w: ["report", str(_run_dir(w, json.dumps(GOOD_RESULT))),
                                                       "--out", afile(w)]),
        _cli_case("search --top 0", lambda w: ["search", placer, "--top", "0"]),
        _cli_case("search --top -3", lambda w: ["search", placer, "--top", "-3"]),
        _cli_case("search --gpus 0", lambda w: ["search", placer, "--gpus", "0"]),
        _cli_case("search --gpus 10**9", lambda w: ["search", placer, "--gpus", "1000000000"]),
        _cli_case("sweep-merge of nothing real", lambda w: ["sweep-merge", str(w / "a"), str(w / "b"), "--out",
                                                            str(w / "c")]),
        _cli_case("sweep-merge of a file", lambda w: ["sweep-merge", afile(w), "--out", str(w / "c")]),
    ]


GOOD_RESULT = {"name": "x", "status": "ok", "iteration_times_s": [0.01], "emulated_over_predicted": [1.0],
               "predicted_iteration_time_s": 0.01, "sums_correct": True, "dilation": 10, "byte_scale": 0.1,
               "breakdown": {"compute_s": 0.004, "communication_s": 0.006},
               "predicted_breakdown": {"compute_s": 0.004, "communication_s": 0.006},
               "fidelity": {"ok": True, "monitors": {}}}


def _run_dir(work: Path, results: str | bytes | None, events: bytes | None = None,
             schedule: bytes | None = None) -> Path:
    directory = work / "run"
    directory.mkdir(exist_ok=True)
    if isinstance(results, str):
        (directory / "results.json").write_text(results)
    elif isinstance(results, bytes):
        (directory / "results.json").write_bytes(results)
    if events is not None:
        (directory / "events.jsonl").write_bytes(events)
    if schedule is not None:
        (directory / "schedule.json").write_bytes(schedule)
    return directory


def run_dir_cases() -> list[Case]:
    good = json.dumps(GOOD_RESULT)

    def case(name: str, results: str | bytes | None, events: bytes | None = None, schedule: bytes | None = None,
             expect: str = REFUSE) -> list[Case]:
        made = [Case("run directories", f"report: {name}",
                     lambda w: ["report", str(_run_dir(w, results, events, schedule))], expect)]
        if events is None and schedule is None:
            made.append(Case("run directories", f"API load_run: {name}", lambda w: _load_run(_run_dir(w, results)),
                             expect))
        return made

    def changed(**fields: Any) -> str:
        return json.dumps({**GOOD_RESULT, **fields})
    cases: list[Case] = []
    for args in [
        ("a valid results.json", good, None, None, EITHER),
        ("empty results.json", ""), ("truncated results.json", good[:40]), ("a list", "[1, 2]"),
        ("a number", "3"), ("null", "null"), ("not UTF-8", good.encode("utf-16")),
        ("breakdown a list", changed(breakdown=[1, 2])), ("times missing", changed(iteration_times_s=None)),
        ("a negative time", changed(iteration_times_s=[-1])),
        ("a NaN time", good.replace("[0.01]", "[NaN]")), ("an infinite time", good.replace("[0.01]", "[Infinity]")),
        ("a zero time", changed(iteration_times_s=[0])), ("a text time", changed(iteration_times_s=["fast"])),
        ("predicted NaN", good.replace('"predicted_iteration_time_s": 0.01', '"predicted_iteration_time_s": NaN')),
        ("predicted missing", json.dumps({k: v for k, v in GOOD_RESULT.items()
                                          if k != "predicted_iteration_time_s"})),
        ("nested 100,000 deep", "[" * 100_000 + "]" * 100_000),
        ("events not UTF-8", good, b"\xff\xfe{}\n"), ("events truncated", good, b'{"t_s": 1, "host"'),
        ("events a list per line", good, b"[1]\n[2]\n"),
        ("events with hosts missing", good, b'{"t_s": 1, "kind": "compute"}\n'),
        ("schedule not JSON", good, None, b"{"), ("schedule a list", good, None, b"[]"),
        ("schedule matrix of text", good, None, b'{"traffic_matrix_bytes": [["a"]]}'),
    ]:
        cases += case(*args)  # type: ignore[arg-type]
    cases.append(Case("run directories", "report: results.json a directory",
                      lambda w: ["report", str(_dir_with(w, "results.json"))]))
    cases.append(Case("run directories", "report: results.json links to /dev/zero",
                      lambda w: ["report", str(_link_in(w, "results.json", "/dev/zero"))]))
    return cases


def _load_run(directory: Path) -> Callable[[], Any]:
    import testbed

    return lambda: testbed.load_run(directory)


def _dir_with(work: Path, name: str) -> Path:
    (work / "d" / name).mkdir(parents=True)
    return work / "d"


def _link_in(work: Path, name: str, target: str) -> Path:
    (work / "d").mkdir()
    (work / "d" / name).symlink_to(target)
    return work / "d"


def _sweep_dir(work: Path, manifest: str | None, table: str | bytes | None) -> Path:
    directory = work / "sweep"
    directory.mkdir()
    if manifest is not None:
        (directory / "sweep.json").write_text(manifest)
    if isinstance(table, bytes):
        (directory / "results.csv").write_bytes(table)
    elif table is not None:
        (directory / "results.csv").write_text(table)
    return directory


def sweep_dir_cases() -> list[Case]:
    manifest = json.dumps({"scenario": "s.yaml", "sets": {"workload.bytes": [1, 2]}, "points": 2})
    header = ("point,workload.bytes,iteration,emulated_s,predicted_s,emulated_over_predicted,status,faithful,"
              "sums_correct,dilation,byte_scale,run_dir\n")
    table = header + "p0,1,,,0.01,,ok,,,,,runs/p0\np1,2,,,0.02,,ok,,,,,runs/p1\n"
    cases = []
    for name, made_manifest, made_table, expect in [
        ("a valid prediction sweep", manifest, table, EITHER),
        ("empty sweep.json", "", table, REFUSE), ("truncated sweep.json", manifest[:20], table, REFUSE),
        ("sweep.json a list", "[]", table, REFUSE), ("sets missing", json.dumps({"scenario": "s"}), table, REFUSE),
        ("no results.csv", manifest, None, REFUSE), ("empty results.csv", manifest, "", EITHER),
        ("truncated results.csv", manifest, table[:100], REFUSE),
        ("a negative figure", manifest, header + "p0,1,,-1,0.01,,ok,,,,,runs/p0\n", REFUSE),
        ("a column missing", manifest, "point,status\np0,ok\n", REFUSE),
        ("a text figure", manifest, header + "p0,1,,,fast,,ok,,,,,runs/p0\n", REFUSE),
        ("a NaN figure", manifest, header + "p0,1,,,nan,,ok,,,,,runs/p0\n", REFUSE),
        ("results.csv not UTF-8", manifest, table.encode("utf-16"), REFUSE),
    ]:
        cases.append(Case("sweep directories", f"report: {name}",
                          lambda w, m=made_manifest, t=made_table: ["report", str(_sweep_dir(w, m, t))], expect))
        cases.append(Case("sweep directories", f"API load_sweep: {name}",
                          lambda w, m=made_manifest, t=made_table: _load_sweep(_sweep_dir(w, m, t)),
                          EITHER if name in ("a valid prediction sweep", "a column missing", "a text figure",
                                             "a NaN figure", "sets missing", "empty sweep.json",
                                             "truncated sweep.json", "sweep.json a list") else expect))
    return cases


def _load_sweep(directory: Path) -> Callable[[], Any]:
    import testbed

    return lambda: testbed.load_sweep(directory)


def api_cases() -> list[Case]:
    import testbed

    quick = SCENARIOS / "quickstart.yaml"
    placer = SCENARIOS / "placer-example.yaml"

    def call(name: str, make: Callable[[], Any], expect: str = REFUSE) -> Case:
        return Case("Python API", name, lambda w: make, expect)
    return [
        call("load_scenario of a number", lambda: testbed.load_scenario(123)),
        call("load_scenario of None", lambda: testbed.load_scenario(None)),
        call("load_scenario of a list", lambda: testbed.load_scenario([1, 2])),
        call("load_scenario of bytes", lambda: testbed.load_scenario(b"name: x")),
        call("load_scenario of an empty mapping", lambda: testbed.load_scenario({})),
        call("load_scenario with an unknown override", lambda: testbed.load_scenario(quick, warp=3)),
        call("load_scenario with a NaN override", lambda: testbed.load_scenario(
            quick, **{"fabric.gpu_bandwidth_gbps": float("nan")})),
        call("predict of a path", lambda: testbed.predict(str(quick))),
        call("predict of a mapping", lambda: testbed.predict({"name": "x"})),
        call("predict of None", lambda: testbed.predict(None)),
        call("search top 0", lambda: testbed.search(testbed.load_scenario(placer), top=0)),
        call("search top as text", lambda: testbed.search(testbed.load_scenario(placer), top="3")),
        call("search gpus negative", lambda: testbed.search(testbed.load_scenario(placer), gpus=-4)),
        call("search of a collective", lambda: testbed.search(testbed.load_scenario(quick))),
        call("place of a collective", lambda: testbed.place(testbed.load_scenario(quick))),
        call("search_splits of a collective", lambda: testbed.search_splits(testbed.load_scenario(quick))),
        call("load_run of a number", lambda: testbed.load_run(42)),
        call("load_sweep of None", lambda: testbed.load_sweep(None)),
    ]


def corpus() -> list[Case]:
    """Every case, by kind."""
    return (scenario_value_cases() + scenario_file_cases() + trace_cases() + chakra_cases() + profile_cases()
            + cli_cases() + run_dir_cases() + sweep_dir_cases() + api_cases())

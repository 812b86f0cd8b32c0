"""The shape of the code, checked: the import-linter contracts in pyproject.toml (layers, the pure
core, hosts and controller boundaries), no import cycle anywhere (imports inside functions
included), ruff, and mypy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import networkx as nx

from ..conftest import ROOT

BIN = Path(sys.executable).parent


def test_import_contracts_are_kept():
    out = subprocess.run([str(BIN / "lint-imports")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr


def test_no_module_is_caught_in_an_import_cycle():
    graph = grimp.build_graph("testbed", "controller", "hosts")
    edges = nx.DiGraph()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            edges.add_edge(module, imported)
    # A package importing its own submodules is not a cycle between modules.
    cycles = [sorted(c) for c in nx.strongly_connected_components(edges) if len(c) > 1
              and not all(m.startswith(min(c, key=len) + ".") or m == min(c, key=len) for m in c)]
    assert not cycles, cycles


def test_ruff_finds_nothing():
    out = subprocess.run([str(BIN / "ruff"), "check", "testbed", "controller", "hosts", "tests", "bench", "examples"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:]


def test_mypy_finds_nothing():
    # pyproject.toml: every package checked, the pure core strictly (module by module as annotated).
    out = subprocess.run([str(BIN / "mypy")], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:]


def test_kind_behaviour_lives_in_the_kinds_modules():
    """The topology builder and the oracle's fabric models ask the kind's module (testbed/fabrics)
    and compare no kind names themselves; every registered kind has its module."""
    import re

    from testbed.fabrics.all_kinds import BEHAVIOURS, KINDS

    assert set(BEHAVIOURS) == set(KINDS)
    for path in ("testbed/fabrics/topology.py", "testbed/fabrics/timing.py", "testbed/oracle/fabrics.py"):
        text = (ROOT / path).read_text()
        found = re.findall(r"kind\s*(?:==|!=|in)\s*[\"'(]", text)
        assert not found, f"{path} branches on the fabric kind: {found}"


def test_the_pure_layers_load_no_agent_scapy_mininet_or_os_ken():
    """Importing the oracle, placer, fabrics and planning (what `predict` needs) loads none of the
    agents' socket-opening modules, nor scapy, Mininet or os-ken."""
    code = ("import sys, testbed.planning.plan, testbed.workloads.model.search, testbed.oracle.schedule_sim, "
            "testbed.placer.plan, testbed.fabrics.all_kinds, testbed.workloads.all_kinds, "
            "testbed.planning.scenario_file; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('hosts', 'controller', 'scapy', 'mininet', "
            "'os_ken')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout


def test_workload_kinds_are_asked_not_compared():
    """Planning, the emulation, the oracle and the interface ask a workload's kind (its folder in
    testbed/workloads, through the registry) and branch on no workload kind's name; every
    registered section has its kind and its folder."""
    import re

    from testbed.workloads.all_kinds import KINDS, SECTIONS

    assert set(KINDS) == set(SECTIONS.values())
    for name in SECTIONS:
        assert (ROOT / "testbed" / "workloads" / name / "section.py").is_file(), name
    branch = re.compile(r'workload\.kind *(==|!=|in|not in) |\.kind *== *"(collective|model|trace|chakra|jobs)"')
    for package in ("planning", "emulation", "oracle", "interface"):
        for path in sorted((ROOT / "testbed" / package).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                assert not branch.search(line), f"{path.relative_to(ROOT)}:{number} branches on a workload kind"

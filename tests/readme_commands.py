"""The shell commands the README and the guide's pages show, read from their indented command
blocks, so tests can run them as written (the documents cannot drift from the tool)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ("bash", "testbed", "python3")
# The README first (its first block is the set-up), then the guide's pages that it links to.
GUIDE = [ROOT / "README.md"] + [ROOT / "docs" / f"{name}.md" for name in (
    "setup", "commands", "writing-scenarios", "run-directory", "optical", "byteps", "ina", "chakra", "fidelity",
    "faults", "vm")]


def guide_text() -> str:
    return "\n".join(path.read_text() for path in GUIDE)


@dataclass(frozen=True)
class Command:
    line: str  # as written, without its comment
    block: int  # which block of the README it is in (commands of one block run together)

    @property
    def words(self) -> list[str]:
        return shlex.split(self.line.rstrip("&").strip())

    @property
    def background(self) -> bool:
        return self.line.rstrip().endswith("&")


def readme_commands(paths: list[Path] | None = None) -> list[Command]:
    """Lines of 4-space-indented blocks (outside fenced blocks) that start with a program users run."""
    commands, block, fenced, previous_blank, in_block = [], 0, False, True, False
    for raw in "\n\n".join(path.read_text() for path in (paths or GUIDE)).splitlines():
        if raw.startswith("```"):
            fenced = not fenced
        if fenced or raw.startswith("```"):
            previous_blank, in_block = False, False
            continue
        indented = raw.startswith("    ") and raw.strip()
        if indented and (previous_blank or in_block):
            if not in_block:
                block += 1
            in_block = True
            line = re.sub(r"\s+#.*$", "", raw.strip())
            if line.split()[0] in PROGRAMS:
                commands.append(Command(line, block))
        elif raw.strip():
            in_block = False
        previous_blank = not raw.strip()
    return commands

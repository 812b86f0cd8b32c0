"""The VM script refuses bad input with one usage line and exit code 2, before it touches anything."""

from __future__ import annotations

import subprocess

import pytest

from ..conftest import ROOT


@pytest.mark.parametrize("args, usage", [
    (["bogus"], "usage: bash scripts/setup.sh vm [test]"),
    (["exec"], "usage: bash scripts/vm.sh exec COMMAND"),
    (["box"], "usage: bash scripts/vm.sh box FILE.box"),
    (["box", "testbed.img"], "usage: bash scripts/vm.sh box FILE.box"),
])
def test_bad_arguments_get_a_usage_line_and_exit_2(args, usage, tmp_path):
    done = subprocess.run(["bash", str(ROOT / "scripts" / "vm.sh"), *args], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "TESTBED_VM_DIR": str(tmp_path)}, timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip() == usage
    assert list(tmp_path.iterdir()) == []  # nothing cached, nothing built


def test_the_image_key_covers_the_guest_set_up_steps():
    # The key hashes the lines between these markers: if they stop matching, a changed set-up step
    # would silently reuse an image built without it.
    script = (ROOT / "scripts" / "vm.sh").read_text()
    marked = subprocess.run(["sed", "-n", "/^ *# --- guest set-up/,/^ *# --- end/p", str(ROOT / "scripts" / "vm.sh")],
                            capture_output=True, text=True, check=True).stdout
    assert "/^ *# --- guest set-up/,/^ *# --- end/p" in script
    assert "authorized_keys" in marked and "ssh-keygen -A" in marked and len(marked.splitlines()) > 10

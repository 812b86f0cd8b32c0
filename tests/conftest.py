"""Shared fixtures: a scratch registry so tests never see (or touch) other runs' records."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def scratch_registry(tmp_path, monkeypatch):
    directory = tmp_path / "registry"
    monkeypatch.setenv("TESTBED_REGISTRY_DIR", str(directory))
    return directory


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (Mininet and Open vSwitch)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)

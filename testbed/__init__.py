"""Network-emulation testbed for ML-training interconnects.

The Python API (testbed.interface.api), loaded on first use so that importing a part of the
package (the model, the oracle) loads nothing else: load_scenario, predict, predict_each_job,
place, search, search_splits, run, load_run, load_sweep."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

API = ("load_scenario", "predict", "predict_each_job", "place", "search", "search_splits", "run", "load_run",
       "load_sweep")
__all__ = list(API)


def __getattr__(name: str) -> Any:
    if name in API:
        from testbed.interface import api

        return getattr(api, name)
    raise AttributeError(f"module 'testbed' has no attribute {name!r}")

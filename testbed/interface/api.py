"""The Python API a notebook or script drives studies with: load a scenario, predict it, place or
search its model, run it, and read run and sweep directories back as pandas DataFrames. The same
code paths as the command line (`testbed.load_scenario`, `testbed.predict`, ...)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.interface.records import run_results, sweep_text
from testbed.model.errors import InputError
from testbed.model.scenario import Scenario, ScenarioOf
from testbed.network.collectives import Prediction
from testbed.placer.plan import Plan
from testbed.planning.overrides import apply_overrides
from testbed.planning.plan import predict_jobs, predict_scenario
from testbed.planning.scenario_file import load_scenario as _load_file
from testbed.planning.scenario_file import parse_scenario
from testbed.workloads.llm.search import Split
from testbed.workloads.model.search import Choice
from testbed.workloads.predicted import JobPrediction

if TYPE_CHECKING:
    import pandas


def load_scenario(source: str | Path | Mapping[str, Any], **overrides: Any) -> Scenario:
    """A scenario from a YAML file or a dict, validated as `testbed check` does; `overrides` set
    dotted fields, written with `__` for the dots: `load_scenario(path, fabric__hosts=16)`."""
    if isinstance(source, Mapping):
        scenario = parse_scenario(dict(source), "scenario")
    else:
        scenario = _load_file(_path(source, "load_scenario", "a scenario file's path or a dict"))
    if overrides:
        scenario = apply_overrides(scenario, {key.replace("__", "."): value for key, value in overrides.items()})
    return scenario


def predict(scenario: Scenario) -> Prediction:
    """The one predicted iteration time a run is judged against: `.iteration_time_s`,
    `.breakdown` (compute_s, communication_s, reconfiguration_s, ...) and `.formula`."""
    return predict_scenario(_scenario(scenario, "predict"))


def predict_each_job(scenario: Scenario) -> list[JobPrediction]:
    """For a scenario of several jobs: each job's time beside the others (`together_s`) and alone."""
    if not _scenario(scenario, "predict_each_job").jobs:
        raise InputError(f"{scenario.name}: predict_each_job needs a scenario with jobs")
    return predict_jobs(scenario)[1]


def place(scenario: Scenario) -> Plan:
    """SiP-ML's placement of the scenario's model workload (per-GPU ops, traffic, memory)."""
    from testbed.workloads.model.plan import model_plan
    from testbed.workloads.model.section import ModelWorkload

    if not isinstance(_scenario(scenario, "place").workload, ModelWorkload):
        raise InputError(f"{scenario.name}: place needs workload.kind model (got {scenario.workload.kind})")
    return model_plan(scenario)


def search_splits(scenario: Scenario, gpus: int | None = None, top: int = 5) -> list[Split]:
    """The `top` fastest (tp, pp, dp, micro-batch) splits of the scenario's large model (workload
    kind llm) that fit in its device's memory, best first."""
    from testbed.workloads.llm.search import search_splits as splits
    from testbed.workloads.llm.section import LlmWorkload

    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InputError(f"search_splits(top={top!r}): give how many splits to list, an integer of 1 or more")
    if not isinstance(_scenario(scenario, "search_splits").workload, LlmWorkload):
        raise InputError(f"search_splits needs workload.kind llm (got {scenario.workload.kind})")
    return splits(scenario, gpus, top)[0]


def search(scenario: Scenario, gpus: int | None = None, top: int = 1) -> list[Choice]:
    """The `top` (mp, dp, global batch) choices with the lowest time to accuracy for the scenario's
    zoo model on its fabric, best first, each with its breakdown."""
    from testbed.workloads.model.search import ranked, search_space

    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InputError(f"search(top={top!r}): give how many choices to list, an integer of 1 or more")
    space = search_space(_scenario(scenario, "search"), gpus)
    return ranked(space.cache, space.gpus, space.fabric, ks=space.ks, top=top)


def run(scenario: Scenario, out: str | Path | None = None) -> dict[str, Any]:
    """Emulates the scenario (as root, on Mininet) and returns results.json; the run directory is
    `out`, or runs/<name>-<timestamp>."""
    from testbed.emulation.run import Runner, default_run_dir
    from testbed.planning.plan import prepare

    run_dir = _path(out, "run", "a directory path") if out is not None else default_run_dir(_scenario(scenario, "run"))
    return Runner(prepare(scenario), run_dir).execute()


def load_run(directory: str | Path) -> "pandas.DataFrame":
    """A run directory's iterations, one row each (one per job and iteration where the scenario
    has jobs): emulated and predicted seconds, their ratio, steal, TCP retransmissions; the whole
    results.json is in `.attrs["results"]`."""
    import pandas

    path = _path(directory, "load_run", "a run directory's path") / "results.json"
    if not path.exists():
        raise InputError(f"{path}: no results.json; give a run directory (testbed run --out DIR)")
    results = run_results(path.parent)
    try:
        rows = _run_rows(results)
    except (KeyError, TypeError, IndexError, AttributeError) as error:
        raise InputError(f"{path}: a damaged run's results ({type(error).__name__}: {str(error)[:80]}); run it "
                         f"again or give another directory") from None
    frame = pandas.DataFrame(rows, columns=["job", "iteration", "emulated_s", "predicted_s", "emulated_over_predicted",
                                            "steal_frac", "tcp_retransmits", "tcp_timeouts"])
    frame.attrs["results"] = results
    return frame


def _run_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    runs = [("", results)] + [(name, job) for name, job in (results.get("jobs") or {}).items()]
    for job, record in runs:
        for i, emulated_s in enumerate(record["iteration_times_s"]):
            rows.append({"job": job, "iteration": i, "emulated_s": emulated_s,
                         "predicted_s": record["predicted_iteration_time_s"],
                         "emulated_over_predicted": record["emulated_over_predicted"][i]
                         if i < len(record["emulated_over_predicted"]) else None,
                         "steal_frac": _at(results.get("iteration_steal_frac"), i),
                         "tcp_retransmits": _at(results.get("iteration_tcp_retransmits"), i),
                         "tcp_timeouts": _at(results.get("iteration_tcp_timeouts"), i)})
    return rows


def load_sweep(directory: str | Path) -> "pandas.DataFrame":
    """A sweep directory's results.csv: one row per point and iteration, with the swept values."""
    import pandas

    path = _path(directory, "load_sweep", "a sweep directory's path") / "results.csv"
    if not path.exists():
        raise InputError(f"{path}: no results.csv; give a sweep directory (testbed sweep --out DIR)")
    text = sweep_text(path.parent)
    if not text.strip():
        raise InputError(f"{path}: empty, no point of the sweep finished; run the sweep or give another directory")
    try:
        return pandas.read_csv(io.StringIO(text))
    except (ValueError, pandas.errors.ParserError) as error:
        raise InputError(f"{path}: not a sweep's table ({str(error).splitlines()[0][:120]}); run the sweep "
                         f"again or give another directory") from None


def _at(values: list[Any] | None, index: int) -> Any:
    return values[index] if values is not None and index < len(values) else None


def _scenario(value: Any, call: str) -> Scenario:
    if not isinstance(value, ScenarioOf):
        raise InputError(f"{call}() takes a scenario (testbed.load_scenario(path or dict)), not a "
                         f"{type(value).__name__}")
    return value


def _path(value: Any, call: str, what: str) -> Path:
    if not isinstance(value, (str, Path)) or not str(value):
        raise InputError(f"{call}() takes {what}, not {type(value).__name__} {str(value)[:40]!r}")
    return Path(value)

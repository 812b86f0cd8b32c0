"""The replicas' gradient all-reduce through the fabric's aggregation node (parallel.dp_algorithm
ina): what the fabric must offer, checked before anything is planned."""

from __future__ import annotations

from testbed.fabrics.ina.node_links import ina_window
from testbed.fabrics.ina.section import InaFabric
from testbed.model.errors import InputError
from testbed.model.limits import INA_MAX_WORKERS
from testbed.model.scenario import Scenario
from testbed.workloads.llm.section import LlmWorkload


def check_ina(scenario: Scenario, workload: LlmWorkload) -> None:
    """Each data-parallel group is one INA job of dp workers, on reserved slots of a lossless node
    (what the oracle's step-level model of INA covers; a collective workload studies the rest)."""
    par, fabric = workload.parallel, scenario.fabric
    if par.dp_algorithm != "ina":
        return
    where = f"{scenario.name}: workload.parallel.dp_algorithm ina"
    if not isinstance(fabric, InaFabric):
        raise InputError(f"{where} needs an aggregation node: set fabric.kind to ina, or dp_algorithm to ring")
    if fabric.sharing != "reserved" or fabric.loses_packets():
        raise InputError(f"{where} is modelled on reserved slots of a lossless node: set fabric.sharing to "
                         f"reserved and fabric.node_drop_frac and link_loss_frac to 0 (a collective workload "
                         f"with algorithm ina studies shared slots and loss)")
    if fabric.workers_per_job not in (None, par.dp):
        raise InputError(f"{where}: each data-parallel group of {par.dp} GPUs is one INA job, but "
                         f"fabric.workers_per_job is {fabric.workers_per_job}; unset it or set it to {par.dp}")
    if par.dp > INA_MAX_WORKERS:
        raise InputError(f"{where}: an INA job has at most {INA_MAX_WORKERS} workers (the node's worker "
                         f"bitmap) and dp is {par.dp}; lower dp or use dp_algorithm ring")
    try:
        ina_window(fabric, par.dp)
    except InputError as error:
        raise InputError(f"{scenario.name}: {error}") from None

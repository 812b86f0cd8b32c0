"""The registry of fabric kinds: for each, its own scenario fields, whether `testbed run` emulates
it, which os-ken app programs it, and whether hosts route over it (lightpaths and circuits).

The scenario model, the runner, the Mininet shim and the controller's launcher all read this one
table, so a kind is described once instead of in parallel lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

from testbed.model.limits import INA_MAX_WORKERS as MAX_WORKERS

FabricKind = Literal["elect-flat", "elect-cluster", "elect-fattree", "sip-ocs", "sip-ring", "ina", "ps"]


@dataclass(frozen=True)
class KindSpec:
    name: FabricKind
    description: str
    fields: tuple[str, ...] = ()  # scenario fields that mean something for this kind only (or few)
    emulated: bool = True  # `testbed run` builds it in Mininet (else the oracle alone answers)
    controller_app: str | None = "controller.flat_app"  # None: no switch, so no controller
    routed: bool = False  # hosts route over the fabric's current lightpaths or circuits
    reconfigurable: bool = False  # the controller changes it during a run (northbound API, dark time)
    # GPUs reach one another through an aggregation node program the run starts beside the agents;
    # packets are dropped by that node (its own loss), not by a switch.
    aggregation_node: bool = False
    cpu_machines: bool = False  # ranks after the GPUs are CPU machines (cpu_servers) that sum for BytePS
    # What the controller sets and the northbound API takes: circuits `(switch, src, dst)` or
    # lightpaths `(src, dst) -> wavelengths`; None for fabrics whose links never change.
    link_state: Literal["circuits", "lightpaths"] | None = None
    multipath: bool = False  # several equal-cost switch paths: the controller hashes flows over them (ECMP)
    # GPUs sit in servers of `gpus_per_server` on a fast local switch: collectives that use CPU
    # machines (BytePS) sum within a server first.
    servers: bool = False
    parameter_server: bool = False  # BytePS and classic PS all-reduce run on it (switched any-to-any)
    non_blocking: bool = False  # one switch with B per GPU each way: the closed-form costs hold exactly
    # The kind's own constraints on a scenario's fabric section: the first broken one's sentence.
    check: Callable[[Any], str | None] = lambda fabric: None


def _check_fattree(fabric: Any) -> str | None:
    if fabric.hosts % fabric.leaf_hosts:
        return f"leaf_hosts ({fabric.leaf_hosts}) must divide hosts ({fabric.hosts}): every leaf is full"
    return None


def _check_ring(fabric: Any) -> str | None:
    return "kind sip-ring needs 'wavelengths' (W)" if fabric.wavelengths is None else None


def _check_ina(fabric: Any) -> str | None:
    per_job = fabric.workers_per_job or fabric.hosts
    if fabric.hosts % per_job:
        return f"workers_per_job ({per_job}) must divide hosts ({fabric.hosts}): the hosts form equal jobs"
    if per_job > MAX_WORKERS:
        return (f"an INA job has at most {MAX_WORKERS} workers (the node's worker bitmap); set workers_per_job to "
                f"{MAX_WORKERS} or fewer")
    return None


KINDS: dict[str, KindSpec] = {spec.name: spec for spec in (
    KindSpec("elect-flat", "one non-blocking electrical switch", non_blocking=True, parameter_server=True),
    KindSpec("elect-cluster", "servers of GPUs on a fast local switch, joined by uplinks",
             fields=("gpus_per_server", "server_uplink_gbps"), servers=True, parameter_server=True),
    KindSpec("elect-fattree", "a two-tier leaf-spine: leaf switches of GPUs, each wired to every spine, "
             "flows hashed over the spines (ECMP)", fields=("leaf_hosts", "spines", "oversubscription"),
             multipath=True, check=_check_fattree),
    KindSpec("ps", "GPUs and CPU machines of a parameter server (BytePS) on one switch",
             fields=("cpu_servers",), cpu_machines=True, parameter_server=True),
    KindSpec("sip-ocs", "silicon-photonic interfaces into optical circuit switches",
             fields=("ocs_switches", "multi_shot", "estimate_period_us"),
             controller_app="controller.optical_app", routed=True, reconfigurable=True, link_state="circuits"),
    KindSpec("sip-ring", "a silicon-photonic micro-ring ring of wavelength lightpaths",
             fields=("wavelengths", "wavelength_gbps", "neighbors", "estimate_period_us"),
             controller_app="controller.optical_app", routed=True, reconfigurable=True, link_state="lightpaths",
             check=_check_ring),
    KindSpec("ina", "in-network aggregation through a node program",
             fields=("aggregation_gbps", "slots", "workers_per_job", "sharing", "node_drop_frac", "link_loss_frac"),
             controller_app=None, aggregation_node=True, check=_check_ina),
)}


def kind_specific_fields() -> dict[str, tuple[str, ...]]:
    """Each kind-specific scenario field and the kinds it belongs to."""
    owners: dict[str, tuple[str, ...]] = {}
    for spec in KINDS.values():
        for field in spec.fields:
            owners[field] = owners.get(field, ()) + (spec.name,)
    return owners


EMULATED_FABRICS = tuple(name for name, spec in KINDS.items() if spec.emulated)
PARAMETER_SERVER_FABRICS = tuple(name for name, spec in KINDS.items() if spec.parameter_server)
ROUTED_FABRICS = tuple(name for name, spec in KINDS.items() if spec.routed)
CONTROLLER_APPS = {name: spec.controller_app for name, spec in KINDS.items() if spec.controller_app}

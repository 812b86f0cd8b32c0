"""`job_sharing: partitioned`: each job's fixed share of a reconfigurable fabric (wavelengths of
SiP-Ring's spectrum, switches of SiP-OCS, in proportion to its GPUs), planned from its own traffic
alone; the fabric's plan is the union. The oracle's flow models and re-plans and the controller's
link state all come from here, so a job's retune never darkens another job's links."""

from __future__ import annotations

from typing import Any

from testbed.fabrics.all_kinds import behaviour
from testbed.model.errors import InputError
from testbed.model.fabric_section import FabricSection
from testbed.network.flow_model import FlowModel, Traffic
from testbed.shared.collective_plans import barrier_pairs

Groups = tuple[tuple[int, ...], ...]  # each job's GPUs, the fabric's hosts


def shares(fabric: FabricSection, groups: Groups) -> list[tuple[FabricSection, int]]:
    """Each job's share: the fabric as that job alone plans on, and the first switch it owns."""
    share = behaviour(fabric.kind).shares
    if share is None:
        raise InputError(f"job_sharing: partitioned applies to fabrics whose controller plans circuits or "
                         f"wavelengths (sip-ocs, sip-ring); on {fabric.kind} the jobs share the links as they are")
    return share(fabric, [len(group) for group in groups])


def _inside(pairs: dict[tuple[int, int], Any], members: set[int]) -> dict[tuple[int, int], Any]:
    return {pair: value for pair, value in pairs.items() if pair[0] in members and pair[1] in members}


def _own(resource: tuple[Any, ...], members: set[int]) -> bool:
    """A resource of one job's plan: every GPU it names is the job's."""
    return all(part in members for part in resource[1:] if isinstance(part, int))


def _kept(recurring: tuple[tuple[int, int], ...], group: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """The pairs a job's plan keeps reachable: its recurring pairs and its agents' barrier ring."""
    own = set(_inside(dict.fromkeys(recurring), set(group)))
    return tuple(sorted(own | set(barrier_pairs(list(group)))))


def merged(models: list[FlowModel], groups: Groups) -> FlowModel:
    """One flow model from each job's (each job's resources and paths from its own)."""
    capacity: dict[Any, float] = {}
    paths: dict[tuple[int, int], tuple[Any, ...]] = {}
    for model, group in zip(models, groups):
        members = set(group)
        capacity.update({r: c for r, c in model.capacity_bps.items() if _own(r, members)})
        paths.update(_inside(model.paths, members))
    owner = {g: i for i, group in enumerate(groups) for g in group}

    def default(src: int, dst: int) -> tuple[Any, ...]:
        if src not in owner or owner[src] != owner.get(dst):
            raise KeyError(f"GPUs {src} and {dst} belong to different jobs of a partitioned fabric")
        return models[owner[src]].resources(src, dst)

    return FlowModel(capacity, paths, default, notes=[note for m in models for note in m.notes],
                     dark_s=max((m.dark_s for m in models), default=0.0))


def flow_model(fabric: FabricSection, groups: Groups, n: int, traffic: Traffic) -> FlowModel:
    """The oracle's flow model: each job's plan (the kind's flow model) on its share."""
    plan = behaviour(fabric.kind).flow_model
    models = [plan(sub, n, 1, _inside(traffic, set(group)), 0.0) for (sub, _), group in zip(shares(fabric, groups),
                                                                                             groups)]
    return merged(models, groups)


def replan(fabric: FabricSection, groups: Groups, n: int, traffic: Traffic, recurring: tuple[tuple[int, int], ...],
           current: FlowModel, dark_s: float) -> FlowModel:
    """The oracle's re-plan: each job re-plans its share from its own traffic and plan in force
    (a job whose gain does not pay its dark time keeps its plan, whatever the others do)."""
    replan_one = behaviour(fabric.kind).replan
    assert replan_one is not None
    models = []
    for (sub, _), group in zip(shares(fabric, groups), groups):
        members = set(group)
        mine = FlowModel({r: c for r, c in current.capacity_bps.items() if _own(r, members)},
                         _inside(current.paths, members), current.default)
        measured = _inside(traffic, members)
        if not measured:  # a job that moved nothing this period keeps its plan, as the whole fabric would
            models.append(mine)
            continue
        try:
            models.append(replan_one(sub, n, 1, measured, _kept(recurring, group), mine, dark_s))
        except ValueError:  # the plan would leave a pair of the job without a path: the controller
            models.append(mine)  # refuses such a plan and keeps the one in force
    return merged(models, groups)


def link_state(topology: Any, fabric: FabricSection, groups: Groups, traffic: Traffic,
               recurring: tuple[tuple[int, int], ...], current: dict[Any, int] | None, dark_s: float) -> dict[Any, int]:
    """The controller's link state: each job's, from the kind's controller plan on its share (its
    keys moved onto the job's own switches)."""
    rules = behaviour(fabric.kind).link_rules
    assert rules is not None
    state: dict[Any, int] = {}
    for (sub, first_switch), group in zip(shares(fabric, groups), groups):
        members = set(group)

        def owned(key: Any) -> bool:
            return all(g in members for g in rules.pair_of(key))
        mine = None if current is None else {rules.shift(key, -first_switch): v for key, v in current.items()
                                             if owned(key)}
        planned = rules.plan(topology, sub, _inside(traffic, members), _kept(recurring, group), mine, dark_s)
        state.update({rules.shift(key, first_switch): v for key, v in planned.items() if owned(key)})
    return state

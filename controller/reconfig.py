"""Pure reconfiguration logic: from the current link state and a requested one, the state during the
dark time and the operations that move the fabric from one rendering to the next (explicit `now`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from testbed.fabrics.rendering import Hold, Rendering
from testbed.model.openflow import FlowRule


@dataclass(frozen=True)
class Operations:
    """What to send: rule deletions and additions per switch, batch lines per host."""

    delete: dict[int, tuple[FlowRule, ...]] = field(default_factory=dict)
    add: dict[int, tuple[FlowRule, ...]] = field(default_factory=dict)
    host_lines: dict[int, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Reconfiguration:
    """One change of the link state. `dark` is what carries traffic while the changed links retune:
    every link at the smaller of its old and new amount; the new amounts arrive `dark_s` later."""

    id: int
    requested_s: float
    dark_s: float
    old: dict
    dark: dict
    new: dict
    source: str  # who asked: initial, policy, api

    def changed(self) -> list:
        return sorted(k for k in set(self.old) | set(self.new) if self.old.get(k, 0) != self.new.get(k, 0))

    def event(self, darkness: Darkness, dilation: float) -> dict:
        """The events.jsonl record; times are emulated seconds since the run's epoch, with real-world
        equivalents (divided by the dilation) beside them."""
        return {"kind": "reconfiguration", "id": self.id, "source": self.source,
                "requested_s": self.requested_s, "dark_start_s": darkness.dark_start_s,
                "restored_s": darkness.restored_s,
                "configured_dark_s": self.dark_s, "measured_dark_s": darkness.measured_s,
                "real_configured_dark_s": self.dark_s / dilation,
                "real_measured_dark_s": darkness.measured_s / dilation,
                "changed": [list(k) if isinstance(k, tuple) else k for k in self.changed()],
                "t_s": self.requested_s, "host": -1}


@dataclass(frozen=True)
class Darkness:
    """When a reconfiguration's links went dark and came back, as the hosts applied it."""

    dark_start_s: float  # the first host's changed links went dark
    restored_s: float  # the last host's came back
    measured_s: float  # the longest any one host's changed links were dark


def darkness(dark_at_s: float, restore_at_s: float, dark_done_s: dict[int, float],
             restore_done_s: dict[int, float]) -> Darkness:
    """A host's links are dark from when its darkening lines took effect until its restoring ones
    did. A host with nothing to do in a phase takes that phase's agreed instant: its link darkens
    (a new lightpath retunes) or comes back (a removed one) with no action of its own."""
    hosts = set(dark_done_s) | set(restore_done_s)
    if not hosts:
        return Darkness(dark_at_s, restore_at_s, restore_at_s - dark_at_s)
    starts = {h: dark_done_s.get(h, dark_at_s) for h in hosts}
    ends = {h: restore_done_s.get(h, restore_at_s) for h in hosts}
    return Darkness(min(starts.values()), max(ends.values()), max(ends[h] - starts[h] for h in hosts))


def dark_state(old: dict, new: dict) -> dict:
    return {k: min(old.get(k, 0), new.get(k, 0)) for k in set(old) | set(new) if min(old.get(k, 0), new.get(k, 0)) > 0}


def normalise(state: dict) -> dict:
    return {k: int(c) for k, c in state.items() if c > 0}


def request(current: dict, wanted: dict, now_s: float, dark_s: float, ident: int,
            source: str) -> Reconfiguration | None:
    """The reconfiguration from `current` to `wanted`, or None when nothing changes."""
    old, new = normalise(current), normalise(wanted)
    if old == new:
        return None
    return Reconfiguration(ident, now_s, dark_s, old, dark_state(old, new), new, source)


def operations(before: Rendering, after: Rendering) -> Operations:
    delete = {d: tuple(sorted(before.rules.get(d, frozenset()) - rules, key=repr)) for d, rules in after.rules.items()}
    add = {d: tuple(sorted(rules - before.rules.get(d, frozenset()), key=repr)) for d, rules in after.rules.items()}
    lines = {}
    for rank, wanted in after.host_lines.items():
        had = before.host_lines.get(rank, {})
        changed = tuple(line for key, text in sorted(wanted.items()) if had.get(key) != text
                        for line in text.split("\n"))
        if changed:
            lines[rank] = changed
    return Operations(delete, add, lines)


def key(rule: FlowRule) -> tuple:
    """What identifies a rule to a switch: a rule with the same key replaces it."""
    return rule.table, rule.priority, rule.match


def split_new_rules(before: Rendering, ops: Operations) -> tuple[dict[int, tuple], Operations]:
    """Rules of `ops` that match nothing `before` has, and the rest of `ops`. A rule for a link
    that is not there yet (a new circuit's port, a new lightpath's destination) carries nothing
    until hosts route onto it, so it can be installed and confirmed while the links are dark;
    a rule that changes where existing packets go must wait for the restore."""
    new, rest = {}, {}
    for dpid, rules in ops.add.items():
        existing = {key(r) for r in before.rules.get(dpid, frozenset())}
        new[dpid] = tuple(r for r in rules if key(r) not in existing)
        rest[dpid] = tuple(r for r in rules if key(r) in existing)
    return new, Operations(ops.delete, rest, ops.host_lines)


@dataclass(frozen=True)
class Steps:
    """A reconfiguration as batches: `ahead` (before the dark starts), `dark` (hosts off the
    changed links, then the switches), `restore` (after the dark time, hosts only) and `after`
    (switch deletions once the restore is done)."""

    ahead: Operations
    dark: Operations
    restore: Operations
    # Deletions of rules for links that went dark for good, sent once the restore is done: the
    # packets a host queued on such a link before it moved off still drain over it, and a rule
    # deleted under them dropped their tails (TCP waited out a retransmission timeout for each).
    after: Operations = field(default_factory=Operations)


def steps(old: Rendering, dark: Rendering | Hold, new: Rendering) -> Steps:
    """Rules for links that exist in neither the old nor the dark rendering carry nothing until
    hosts route onto them: they go in ahead, confirmed before the dark starts. Rules the dark
    rendering lacks but the old one has a rule for (a circuit's port given a new peer) follow the
    darkening deletions in the same batch. Everything the dark time then waits on is at most one
    switch round trip (userspace OVS can take tens of ms to confirm under load). The restore is the
    hosts' alone: a rule whose link stays lit is the same in the dark and the new rendering, so no
    switch waits on the restore and the hosts can time it themselves. With a `Hold`, the restore
    first sends what waited for the new links, then routes onto them, then forgets the hold."""
    hold = dark if isinstance(dark, Hold) else Hold(dark, {}, {})
    dark = hold.dark
    ahead, _ = split_new_rules(old, operations(old, new))
    darkening = operations(old, dark)
    early, restore = split_new_rules(dark, operations(dark, new))
    adds = {}
    for dpid in set(darkening.add) | set(early):
        already = set(ahead.get(dpid, ()))
        adds[dpid] = darkening.add.get(dpid, ()) + tuple(r for r in early.get(dpid, ()) if r not in already)
    restore_lines = {rank: hold.release.get(rank, ()) + restore.host_lines.get(rank, ()) + hold.forget.get(rank, ())
                     for rank in set(restore.host_lines) | set(hold.release)}
    # A deletion whose match nothing later reuses (no port re-pointed, no link back in the new
    # plan) can wait until after the restore.
    dark_delete, after = {}, {}
    for dpid, rules in darkening.delete.items():
        keep = {key(r) for r in (*adds.get(dpid, ()), *new.rules.get(dpid, frozenset()))}
        dark_delete[dpid] = tuple(r for r in rules if key(r) in keep)
        after[dpid] = tuple(r for r in rules if key(r) not in keep)
    return Steps(Operations(add={d: r for d, r in ahead.items() if r}),
                 Operations(dark_delete, adds, darkening.host_lines),
                 Operations(restore.delete, restore.add, restore_lines),
                 Operations(delete={d: r for d, r in after.items() if r}))

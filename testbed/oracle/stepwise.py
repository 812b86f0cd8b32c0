"""A point-to-point collective whose steps change pattern (pairwise all-to-all, binomial trees,
halving-doubling), simulated as its ranks run it: each rank takes its plan's exchanges in order, a
message moves once its sender and its receiver have both reached the exchange (a collective's
message moves only into a posted receive), and a rank moves on α after its exchange's messages
are delivered.

Simulating such a collective's whole traffic at once lets every pair use its path together: on a
fabric whose pairs differ in rate (SiP-Ring's lightpaths and relays) a pairwise all-to-all then
predicted half of what its n - 1 steps take, each step's pairs alone on their paths."""

from __future__ import annotations

from dataclasses import dataclass, field

from testbed.shared.collective_plans import ELEMENT_BYTES, elements_for, plan

# Ring collectives repeat one pattern every step, so their traffic at once is the same time.
STEPWISE = frozenset({("alltoall", "ring"), ("broadcast", "tree"), ("reduce", "tree"), ("allreduce", "tree"),
                      ("allreduce", "halving-doubling")})

PLAN_ELEMENTS_PER_RANK = 1024  # the plan is cut on a small buffer and its message sizes scaled


@dataclass(frozen=True)
class Move:
    step: int
    send_to: int | None
    send_bytes: float
    recv_from: int | None


@dataclass
class _Rank:
    moves: list[Move]
    at: int = 0
    outstanding: int = 0  # messages of the current exchange not yet delivered

    def current(self) -> Move | None:
        return self.moves[self.at] if self.at < len(self.moves) else None


Message = tuple[int, int, float]  # (sender position, receiver position, bytes)


@dataclass
class StepwiseCollective:
    """The state of one collective among its group's positions 0..n-1."""
    ranks: list[_Rank]
    ready_senders: set[tuple[int, int, int]] = field(default_factory=set)  # (src, dst, step) waiting
    ready_receivers: set[tuple[int, int, int]] = field(default_factory=set)
    finished: set[int] = field(default_factory=set)  # positions whose last exchange is done

    @classmethod
    def of(cls, op: str, algorithm: str, n: int, size_bytes: float) -> StepwiseCollective:
        elements = elements_for(op, ELEMENT_BYTES * PLAN_ELEMENTS_PER_RANK * n, n)
        scale = size_bytes / (ELEMENT_BYTES * elements)
        ranks = []
        for pos in range(n):
            moves = []
            for ex in plan(op, algorithm, pos, n, elements):
                sent = ELEMENT_BYTES * (ex.send[1] - ex.send[0]) * scale if ex.send is not None else 0.0
                send_to = ex.send_to if ex.send_to is not None and sent > 0 else None
                recv_from = ex.recv_from if ex.recv_from is not None and ex.recv is not None \
                    and ex.recv[1] > ex.recv[0] else None
                if send_to is not None or recv_from is not None:  # idle rounds of a tree cost nothing
                    moves.append(Move(ex.step, send_to, sent, recv_from))
            ranks.append(_Rank(moves))
        return cls(ranks)

    def done(self) -> bool:
        return all(rank.current() is None for rank in self.ranks)

    def start(self) -> list[Message]:
        """The messages that move as every rank reaches its first exchange."""
        messages: list[Message] = []
        for pos in range(len(self.ranks)):
            messages += self._arrive(pos)
        return messages

    def delivered(self, src: int, dst: int) -> list[int]:
        """A message of the current exchanges was delivered: the positions whose exchange is done
        (each moves on α later, with `advance`)."""
        finished = []
        for pos in (src, dst):
            rank = self.ranks[pos]
            rank.outstanding -= 1
            if rank.outstanding == 0:
                finished.append(pos)
        return finished

    def advance(self, pos: int) -> list[Message]:
        """Position `pos` moves on to its next exchange: the messages that can move now."""
        self.ranks[pos].at += 1
        return self._arrive(pos)

    def _arrive(self, pos: int) -> list[Message]:
        rank = self.ranks[pos]
        move = rank.current()
        if move is None:
            return []
        rank.outstanding = (move.send_to is not None) + (move.recv_from is not None)
        messages: list[Message] = []
        if move.send_to is not None:
            key = (pos, move.send_to, move.step)
            if key in self.ready_receivers:
                self.ready_receivers.discard(key)
                messages.append((pos, move.send_to, move.send_bytes))
            else:
                self.ready_senders.add(key)
        if move.recv_from is not None:
            key = (move.recv_from, pos, move.step)
            if key in self.ready_senders:
                self.ready_senders.discard(key)
                sender = self.ranks[move.recv_from].current()
                assert sender is not None
                messages.append((move.recv_from, pos, sender.send_bytes))
            else:
                self.ready_receivers.add(key)
        return messages

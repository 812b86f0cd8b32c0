"""Pairing the point-to-point messages of an imported trace: the k-th send from src to dst with a
tag meets the k-th receive of that key (each in its rank's order), as MPI, NCCL and ASTRA-sim
match them. One matcher for every trace format, so they agree on what a well-formed trace is."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from testbed.model.errors import InputError

Tag = TypeVar("Tag", bound=Hashable)


@dataclass(frozen=True)
class Message:
    """One side of a message: where the trace wrote it (for errors), its size, and the caller's
    handle on its step (e.g. the rank and the step's index)."""

    where: str
    bytes: int
    step: tuple[int, int]


@dataclass
class MessageBook(Generic[Tag]):
    """The sends and receives of a trace by (src, dst, tag), in each rank's order."""

    tag_name: str = "tag"  # the trace format's name for the tag field, for errors
    sends: dict[tuple[int, int, Tag], list[Message]] = field(default_factory=lambda: defaultdict(list))
    recvs: dict[tuple[int, int, Tag], list[Message]] = field(default_factory=lambda: defaultdict(list))

    def send(self, src: int, dst: int, tag: Tag, message: Message) -> None:
        self.sends[(src, dst, tag)].append(message)

    def recv(self, src: int, dst: int, tag: Tag, message: Message) -> None:
        self.recvs[(src, dst, tag)].append(message)

    def pairs(self) -> list[tuple[tuple[int, int, Tag], int, Message, Message]]:
        """Every send with its receive: ((src, dst, tag), k, send, recv); an InputError naming the
        step for a send without its receive, a receive without its send, or sizes that differ."""
        keys = sorted(set(self.sends) | set(self.recvs), key=repr)
        for src, dst, tag in keys:  # sends without their receive first: the likelier mistake
            out, into = self.sends.get((src, dst, tag), []), self.recvs.get((src, dst, tag), [])
            if len(out) > len(into):
                raise InputError(f"{out[len(into)].where}: no matching receive on rank {dst} for this message from "
                                 f"rank {src} to rank {dst} with {self.tag_name} {tag}; every send needs its receive")
        matched = []
        for key in keys:
            out, into = self.sends.get(key, []), self.recvs.get(key, [])
            src, dst, tag = key
            if len(into) > len(out):
                raise InputError(f"{into[len(out)].where}: no matching send on rank {src} for this message from "
                                 f"rank {src} to rank {dst} with {self.tag_name} {tag}; it would wait forever")
            for k, (sent, received) in enumerate(zip(out, into)):
                if sent.bytes != received.bytes:
                    raise InputError(f"{sent.where}: sends {sent.bytes} bytes but its recv expects {received.bytes} "
                                     f"(on rank {dst})")
                matched.append((key, k, sent, received))
        return matched

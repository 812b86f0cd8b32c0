"""Pipeline stage 1, the parser: bytes → header and int32 payload, or a typed drop with the
counter it increments. Pure."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hosts.ina.protocol import ELEMENT_BYTES, ELEMENTS_PER_PACKET, HEADER, HEADER_BYTES, RESULT
from testbed.model.limits import INA_MAX_WORKERS as MAX_WORKERS

PAYLOAD_DTYPE = np.dtype(">i4")  # network byte order on the wire


class Header(NamedTuple):
    job: int
    worker: int
    flags: int
    slot: int
    ver: int
    exp: int
    seq: int
    low_seq: int
    bitmap: int
    count: int  # type: ignore[assignment]  # the header field shadows tuple.count, which nothing here calls


class Drop(Exception):
    """A packet the node discards; `reason` names the counter (e.g. `truncated`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse(data: bytes | memoryview) -> tuple[Header, np.ndarray]:
    if len(data) < HEADER_BYTES:
        raise Drop("truncated")
    header = Header(*HEADER.unpack_from(data))
    if header.count > ELEMENTS_PER_PACKET:
        raise Drop("too_many_elements")
    if len(data) != HEADER_BYTES + header.count * ELEMENT_BYTES:
        raise Drop("length_mismatch")
    if header.ver > 1:
        raise Drop("bad_version")
    if header.worker >= MAX_WORKERS:
        raise Drop("unknown_worker")
    if header.flags & RESULT:
        raise Drop("result_from_worker")
    return header, np.frombuffer(data, dtype=PAYLOAD_DTYPE, count=header.count, offset=HEADER_BYTES)


def parse_result(data: bytes | memoryview) -> tuple[Header, np.ndarray]:
    """What a worker accepts: a well-formed packet with the RESULT flag (or a fallback piece)."""
    if len(data) < HEADER_BYTES:
        raise Drop("truncated")
    header = Header(*HEADER.unpack_from(data))
    if header.count > ELEMENTS_PER_PACKET or len(data) != HEADER_BYTES + header.count * ELEMENT_BYTES:
        raise Drop("length_mismatch")
    return header, np.frombuffer(data, dtype=PAYLOAD_DTYPE, count=header.count, offset=HEADER_BYTES)

"""Pipeline stage 4, the deparser: an emitted header and payload back to bytes, and the
replication of a result to every member of the job's multicast group. Pure."""

from __future__ import annotations

import numpy as np

from hosts.ina.aggregate import Emit
from hosts.ina.parser import PAYLOAD_DTYPE
from hosts.ina.protocol import DATA_PORT, FALLBACK_PORT, HEADER


def encode(header, values: np.ndarray) -> bytes:
    return HEADER.pack(*header) + np.asarray(values, dtype=PAYLOAD_DTYPE).tobytes()


def deparse(emit: Emit) -> list[tuple[bytes, tuple[str, int]]]:
    """(bytes, destination) for every copy of the packet: a multicast result becomes one copy per
    worker, each with the worker's id in its header."""
    port = FALLBACK_PORT if emit.fallback else DATA_PORT
    payload = np.asarray(emit.values, dtype=PAYLOAD_DTYPE).tobytes()
    if len(emit.to) == 1:
        return [(HEADER.pack(*emit.header) + payload, (emit.to[0], port))]
    return [(HEADER.pack(*emit.header._replace(worker=w)) + payload, (address, port))
            for w, address in enumerate(emit.to)]

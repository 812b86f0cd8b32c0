"""The INA wire protocol, defined once as a scapy layer; the node and the client use a struct codec
derived from the same field list, and anyone can decode a capture of a run with scapy.

A worker's packet carries one chunk of a job's vector (`count` int32 elements) for aggregation slot
`slot`, shadow copy `ver`; the node's result packet carries the sum back with the RESULT flag and
the bitmap of the workers it contains."""

from __future__ import annotations

import struct

from scapy.fields import (
    ByteField,
    FieldListField,
    FlagsField,
    IntField,
    LongField,
    ShortField,
    SignedByteField,
    SignedIntField,
    _BitField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from testbed.shared.ina_rules import (  # noqa: F401 (the protocol's names, defined without scapy)
    CONTROL_PORT,
    DATA_PORT,
    ELEMENT_BYTES,
    ELEMENTS_PER_PACKET,
    FALLBACK_PORT,
    FRAME_BYTES,
    HEADER_BYTES,
    PAYLOAD_BYTES,
)

FLAG_NAMES = ["RESULT", "RETRANSMIT", "FALLBACK", "MAX", "OVERFLOW", "INT", "FLUSH"]
RESULT, RETRANSMIT, FALLBACK, MAX, OVERFLOW, INT, FLUSH = (1 << i for i in range(len(FLAG_NAMES)))
# On a RESULT, RETRANSMIT says a retransmitted contribution completed the chunk: its round trip
# measured another worker's timeout, not the path, so no worker takes it as a sample (Karn's rule
# for a sum).


class INA(Packet):
    """One aggregation packet. `exp` is the chunk's shared exponent (float payloads are int32 at
    scale 2**(QUANT_BITS - exp)); `low_seq` is the lowest sequence number whose result the worker
    still waits for (shared slots are reclaimed only below every worker's low_seq)."""

    name = "INA"
    fields_desc = [
        ShortField("job", 0),
        ByteField("worker", 0),
        FlagsField("flags", 0, 8, FLAG_NAMES),
        ShortField("slot", 0),
        ByteField("ver", 0),  # shadow copy 0 or 1 (reserved slots)
        SignedByteField("exp", 0),
        IntField("seq", 0),
        IntField("low_seq", 0),
        LongField("bitmap", 0),
        ShortField("count", 0),
        FieldListField("values", [], SignedIntField("", 0), count_from=lambda pkt: pkt.count,
                       max_count=ELEMENTS_PER_PACKET),
    ]


    def mysummary(self) -> str:
        return self.sprintf("INA job %job% worker %worker% seq %seq% slot %slot%/%ver% [%flags%] %count% elements")


bind_layers(UDP, INA, dport=DATA_PORT)
bind_layers(UDP, INA, sport=DATA_PORT)
bind_layers(UDP, INA, dport=FALLBACK_PORT)


def _struct_code(field) -> str:
    if isinstance(field, _BitField):
        return {8: "B", 16: "H", 32: "I"}[field.size]
    return field.fmt.lstrip("!<>=")


HEADER = struct.Struct("!" + "".join(_struct_code(f) for f in INA.fields_desc if f.name != "values"))
# The shared leaf states the header's size for the oracle, which must not import scapy.
assert HEADER.size == HEADER_BYTES, f"INA header is {HEADER.size} bytes, testbed.shared.ina_rules says {HEADER_BYTES}"

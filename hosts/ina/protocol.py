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

DATA_PORT = 47470  # workers → node and node → workers
CONTROL_PORT = 47471  # job registration (TCP, JSON lines) on the node
FALLBACK_PORT = 47472  # end-host aggregation of a job's colliding chunks (shared slots)

# One chunk fills a 1500-byte IP packet: 20 IP + 8 UDP + 26 INA + 360·4 payload = 1494 bytes.
ELEMENTS_PER_PACKET = 360
ELEMENT_BYTES = 4

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
HEADER_BYTES = HEADER.size
PAYLOAD_BYTES = ELEMENTS_PER_PACKET * ELEMENT_BYTES
# Frame bytes on the wire per full chunk: Ethernet 14, IPv4 20, UDP 8, INA header, payload.
FRAME_BYTES = 14 + 20 + 8 + HEADER_BYTES + PAYLOAD_BYTES

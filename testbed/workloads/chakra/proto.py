"""Chakra execution-trace messages (package ChakraProtoMsg), built here from the schema's field
numbers, and the length-delimited framing of a `.et` file: a varint length before every message,
a GlobalMetadata first, then Nodes. Pure (bytes in, bytes out)."""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from testbed.model.errors import InputError

PACKAGE = "ChakraProtoMsg"
VERSION = "0.0.4"  # the schema version this writer follows

NODE_TYPES = {
    "INVALID_NODE": 0, "METADATA_NODE": 1, "MEM_LOAD_NODE": 2, "MEM_STORE_NODE": 3, "COMP_NODE": 4,
    "COMM_SEND_NODE": 5, "COMM_RECV_NODE": 6, "COMM_COLL_NODE": 7, "STORAGE_NODE": 8, "BATCH_NODE": 9,
    "CHECKPOINT_NODE": 10,
}
NODE_TYPE_NAMES = {number: name for name, number in NODE_TYPES.items()}
COLLECTIVES = {
    "ALL_REDUCE": 0, "REDUCE": 1, "ALL_GATHER": 2, "GATHER": 3, "SCATTER": 4, "BROADCAST": 5,
    "ALL_TO_ALL": 6, "REDUCE_SCATTER": 7, "REDUCE_SCATTER_BLOCK": 8, "BARRIER": 9,
}
COLLECTIVE_NAMES = {number: name for name, number in COLLECTIVES.items()}

_F = descriptor_pb2.FieldDescriptorProto
# AttributeProto's oneof `value`: (name, number, scalar type); the *_list ones are messages of
# their own with one repeated `values = 1`.
_SCALARS = [("double", _F.TYPE_DOUBLE), ("float", _F.TYPE_FLOAT), ("int32", _F.TYPE_INT32),
            ("int64", _F.TYPE_INT64), ("uint32", _F.TYPE_UINT32), ("uint64", _F.TYPE_UINT64),
            ("sint32", _F.TYPE_SINT32), ("sint64", _F.TYPE_SINT64), ("fixed32", _F.TYPE_FIXED32),
            ("fixed64", _F.TYPE_FIXED64), ("sfixed32", _F.TYPE_SFIXED32), ("sfixed64", _F.TYPE_SFIXED64),
            ("bool", _F.TYPE_BOOL), ("string", _F.TYPE_STRING), ("bytes", _F.TYPE_BYTES)]
INTEGER_KINDS = tuple(name for name, _ in _SCALARS[2:12])


def _field(message: descriptor_pb2.DescriptorProto, name: str, number: int, kind: int,
           repeated: bool = False, type_name: str | None = None, oneof: int | None = None,
           proto3_optional: bool = False) -> None:
    field = message.field.add(name=name, number=number, type=kind,
                              label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
    if type_name:
        field.type_name = f".{PACKAGE}.{type_name}"
    if oneof is not None:
        field.oneof_index = oneof
    if proto3_optional:
        field.proto3_optional = True


def _schema() -> descriptor_pb2.FileDescriptorProto:
    schema = descriptor_pb2.FileDescriptorProto(name="et_def.proto", package=PACKAGE, syntax="proto3")
    for enum_name, values in (("NodeType", NODE_TYPES), ("CollectiveCommType", COLLECTIVES)):
        enum = schema.enum_type.add(name=enum_name)
        for name, number in values.items():
            enum.value.add(name=name, number=number)
    attribute = descriptor_pb2.DescriptorProto(name="AttributeProto")
    _field(attribute, "name", 1, _F.TYPE_STRING)
    _field(attribute, "doc_string", 2, _F.TYPE_STRING)
    attribute.oneof_decl.add(name="value")
    for index, (scalar, kind) in enumerate(_SCALARS):
        list_name = f"{scalar.capitalize()}List"
        listing = schema.message_type.add(name=list_name)
        _field(listing, "values", 1, kind, repeated=True)
        _field(attribute, f"{scalar}_val", 3 + 2 * index, kind, oneof=0)
        _field(attribute, f"{scalar}_list", 4 + 2 * index, _F.TYPE_MESSAGE, type_name=list_name, oneof=0)
    schema.message_type.append(attribute)
    metadata = schema.message_type.add(name="GlobalMetadata")
    _field(metadata, "version", 1, _F.TYPE_STRING)
    _field(metadata, "attr", 2, _F.TYPE_MESSAGE, repeated=True, type_name="AttributeProto")
    io_info = schema.message_type.add(name="IOInfo")
    for number, name in enumerate(("values", "shapes", "types"), start=1):
        _field(io_info, name, number, _F.TYPE_STRING)
    storage = schema.message_type.add(name="StorageInfo")  # opaque to a network testbed: kept, never read
    node = schema.message_type.add(name="Node")
    _field(node, "id", 1, _F.TYPE_UINT64)
    _field(node, "name", 2, _F.TYPE_STRING)
    _field(node, "type", 3, _F.TYPE_ENUM, type_name="NodeType")
    _field(node, "ctrl_deps", 4, _F.TYPE_UINT64, repeated=True)
    _field(node, "data_deps", 5, _F.TYPE_UINT64, repeated=True)
    _field(node, "start_time_micros", 6, _F.TYPE_UINT64)
    _field(node, "duration_micros", 7, _F.TYPE_UINT64)
    _field(node, "inputs", 8, _F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "outputs", 9, _F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "attr", 10, _F.TYPE_MESSAGE, repeated=True, type_name="AttributeProto")
    node.oneof_decl.add(name="_storage")
    _field(node, "storage", 11, _F.TYPE_MESSAGE, type_name=storage.name, oneof=0, proto3_optional=True)
    return schema


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_schema())
GlobalMetadata: Any = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.GlobalMetadata"))
Node: Any = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.Node"))


def attribute(name: str, value: int | str | bool | list[int]) -> Any:
    """An AttributeProto: integers as int64 (what most writers use), lists as int64_list."""
    attr = Node().attr.add(name=name)
    if isinstance(value, bool):
        attr.bool_val = value
    elif isinstance(value, int):
        attr.int64_val = value
    elif isinstance(value, str):
        attr.string_val = value
    else:
        attr.int64_list.values.extend(value)
    return attr


def attribute_value(attr: Any) -> Any:
    """The value an AttributeProto holds, whichever oneof field it is in (lists as Python lists)."""
    which = attr.WhichOneof("value")
    if which is None:
        return None
    value = getattr(attr, which)
    return list(value.values) if which.endswith("_list") else value


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def encode(metadata: Any, nodes: list[Any]) -> bytes:
    """A `.et` file's bytes: each message after its length as a varint."""
    parts = []
    for message in [metadata, *nodes]:
        body = message.SerializeToString()
        parts += [_varint(len(body)), body]
    return b"".join(parts)


def decode(data: bytes, source: str) -> tuple[Any, list[Any]]:
    """The GlobalMetadata and the Nodes of a `.et` file; a framing or message fault names the file
    and the last node read whole."""
    messages: list[Message] = []
    offset = 0
    while offset < len(data):
        where = "its global metadata" if not messages else \
            f"the message after node {messages[-1].id}" if len(messages) > 1 else "its first node"
        length, shift = 0, 0
        while True:
            if offset >= len(data) or shift > 63:
                raise InputError(f"{source}: truncated or corrupt length prefix of {where} (byte {offset}); "
                                 f"a .et file is varint-length-delimited protobuf messages")
            byte = data[offset]
            offset += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if offset + length > len(data):
            raise InputError(f"{source}: truncated: {where} needs {length} bytes, {len(data) - offset} are left; "
                             f"write the file again")
        message = GlobalMetadata() if not messages else Node()
        try:
            message.ParseFromString(data[offset:offset + length])
        except DecodeError:
            raise InputError(f"{source}: {where} is not a valid Chakra "
                             f"{'GlobalMetadata' if not messages else 'Node'} message") from None
        messages.append(message)
        offset += length
    if not messages:
        raise InputError(f"{source}: empty file; a .et file starts with a GlobalMetadata message")
    return messages[0], messages[1:]

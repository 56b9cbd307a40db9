"""The Chakra execution-trace schema, built at import time from the protobuf runtime alone.

The messages are those of MLCommons Chakra's ``et_def.proto`` (package ``ChakraProtoMsg``) with
the same field numbers and enum values; ``et_def.proto`` beside this module is the reference
text and a test checks that it and the descriptor built here agree. Building the descriptor in
Python (``FileDescriptorProto`` -> a private ``DescriptorPool`` -> message classes) needs no
``protoc`` and no generated ``*_pb2.py``, so there is no coupling between generated code and the
installed protobuf runtime version; a private pool also cannot clash with Chakra's own
``et_def_pb2`` if a user imports both.

Wire types: :data:`NODE_WIRE` and :data:`METADATA_WIRE` give, for each top-level field number,
the wire types a conforming encoder may use; the reader checks them because protobuf parsers
silently keep a field of the wrong wire type as an unknown field, which would let a Node pass
for a GlobalMetadata.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = [
    "AttributeProto",
    "GlobalMetadata",
    "Node",
    "IOInfo",
    "Tensor",
    "BoolList",
    "NODE_TYPES",
    "COMM_TYPES",
    "NODE_WIRE",
    "METADATA_WIRE",
    "FILE_DESCRIPTOR",
]

PACKAGE = "ChakraProtoMsg"

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS: dict[str, int] = {
    "double": _F.TYPE_DOUBLE,
    "float": _F.TYPE_FLOAT,
    "int32": _F.TYPE_INT32,
    "int64": _F.TYPE_INT64,
    "uint32": _F.TYPE_UINT32,
    "uint64": _F.TYPE_UINT64,
    "sint32": _F.TYPE_SINT32,
    "sint64": _F.TYPE_SINT64,
    "fixed32": _F.TYPE_FIXED32,
    "fixed64": _F.TYPE_FIXED64,
    "sfixed32": _F.TYPE_SFIXED32,
    "sfixed64": _F.TYPE_SFIXED64,
    "bool": _F.TYPE_BOOL,
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
}
# AttributeProto's oneof: (scalar type, list message name), numbered 3, 4, 5, 6, ... in order.
_ATTR_KINDS = (
    ("double", "DoubleList"),
    ("float", "FloatList"),
    ("int32", "Int32List"),
    ("int64", "Int64List"),
    ("uint32", "Uint32List"),
    ("uint64", "Uint64List"),
    ("sint32", "Sint32List"),
    ("sint64", "Sint64List"),
    ("fixed32", "Fixed32List"),
    ("fixed64", "Fixed64List"),
    ("sfixed32", "Sfixed32List"),
    ("sfixed64", "Sfixed64List"),
    ("bool", "BoolList"),
    ("string", "StringList"),
    ("bytes", "BytesList"),
)

#: NodeType enum of et_def.proto (name -> value).
NODE_TYPES: dict[str, int] = {
    "INVALID_NODE": 0,
    "METADATA_NODE": 1,
    "MEM_LOAD_NODE": 2,
    "MEM_STORE_NODE": 3,
    "COMP_NODE": 4,
    "COMM_SEND_NODE": 5,
    "COMM_RECV_NODE": 6,
    "COMM_COLL_NODE": 7,
    "STORAGE_NODE": 8,
    "BATCH_NODE": 9,
    "CHECKPOINT_NODE": 10,
}
#: CollectiveCommType enum of et_def.proto (name -> value).
COMM_TYPES: dict[str, int] = {
    "ALL_REDUCE": 0,
    "REDUCE": 1,
    "ALL_GATHER": 2,
    "GATHER": 3,
    "SCATTER": 4,
    "BROADCAST": 5,
    "ALL_TO_ALL": 6,
    "REDUCE_SCATTER": 7,
    "REDUCE_SCATTER_BLOCK": 8,
    "BARRIER": 9,
}

# Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
_VARINT, _LEN = 0, 2
#: Allowed wire types of Node's fields (repeated uint64 may be packed or not).
NODE_WIRE: dict[int, frozenset[int]] = {
    1: frozenset({_VARINT}),
    2: frozenset({_LEN}),
    3: frozenset({_VARINT}),
    4: frozenset({_VARINT, _LEN}),
    5: frozenset({_VARINT, _LEN}),
    6: frozenset({_VARINT}),
    7: frozenset({_VARINT}),
    8: frozenset({_LEN}),
    9: frozenset({_LEN}),
    10: frozenset({_LEN}),
    11: frozenset({_LEN}),
}
#: Allowed wire types of GlobalMetadata's fields.
METADATA_WIRE: dict[int, frozenset[int]] = {1: frozenset({_LEN}), 2: frozenset({_LEN})}


def _field(
    name: str,
    number: int,
    type_: str,
    *,
    repeated: bool = False,
    oneof: int | None = None,
) -> descriptor_pb2.FieldDescriptorProto:
    f = _F(name=name, number=number)
    f.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    if type_ in _SCALARS:
        f.type = _SCALARS[type_]
    elif type_ in ("NodeType", "CollectiveCommType"):
        f.type = _F.TYPE_ENUM
        f.type_name = f".{PACKAGE}.{type_}"
    else:
        f.type = _F.TYPE_MESSAGE
        f.type_name = f".{PACKAGE}.{type_}"
    if oneof is not None:
        f.oneof_index = oneof
    return f


def _build() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(
        name="acesim/workload/chakra/et_def.proto", package=PACKAGE, syntax="proto3"
    )

    attr = fdp.message_type.add(name="AttributeProto")
    attr.field.append(_field("name", 1, "string"))
    attr.field.append(_field("doc_string", 2, "string"))
    attr.oneof_decl.add(name="value")
    number = 3
    for scalar, list_name in _ATTR_KINDS:
        attr.field.append(_field(f"{scalar}_val", number, scalar, oneof=0))
        attr.field.append(_field(f"{scalar}_list", number + 1, list_name, oneof=0))
        number += 2
    for scalar, list_name in _ATTR_KINDS:
        lst = fdp.message_type.add(name=list_name)
        lst.field.append(_field("values", 1, scalar, repeated=True))

    meta = fdp.message_type.add(name="GlobalMetadata")
    meta.field.append(_field("version", 1, "string"))
    meta.field.append(_field("attr", 2, "AttributeProto", repeated=True))

    for enum_name, values in (("NodeType", NODE_TYPES), ("CollectiveCommType", COMM_TYPES)):
        enum = fdp.enum_type.add(name=enum_name)
        for value_name, value in values.items():
            enum.value.add(name=value_name, number=value)

    node = fdp.message_type.add(name="Node")
    for args in (
        ("id", 1, "uint64"),
        ("name", 2, "string"),
        ("type", 3, "NodeType"),
    ):
        node.field.append(_field(*args))
    node.field.append(_field("ctrl_deps", 4, "uint64", repeated=True))
    node.field.append(_field("data_deps", 5, "uint64", repeated=True))
    node.field.append(_field("start_time_micros", 6, "uint64"))
    node.field.append(_field("duration_micros", 7, "uint64"))
    node.field.append(_field("inputs", 8, "IOInfo"))
    node.field.append(_field("outputs", 9, "IOInfo"))
    node.field.append(_field("attr", 10, "AttributeProto", repeated=True))

    io = fdp.message_type.add(name="IOInfo")
    for i, name in enumerate(("values", "shapes", "types"), start=1):
        io.field.append(_field(name, i, "string"))

    tensor = fdp.message_type.add(name="Tensor")
    for i, name in enumerate(
        ("tensor_id", "storage_id", "offset", "num_elem", "elem_bytes"), start=1
    ):
        tensor.field.append(_field(name, i, "uint64"))
    tensor.field.append(_field("device", 6, "string"))
    return fdp


def _message_class(pool: descriptor_pool.DescriptorPool, name: str) -> Any:
    desc = pool.FindMessageTypeByName(f"{PACKAGE}.{name}")
    get_class = getattr(message_factory, "GetMessageClass", None)
    if get_class is not None:  # protobuf >= 4.22
        return get_class(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)  # pragma: no cover


#: The FileDescriptorProto acesim builds (equivalent to et_def.proto beside this module).
FILE_DESCRIPTOR = _build()
_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(FILE_DESCRIPTOR)

AttributeProto: Any = _message_class(_POOL, "AttributeProto")
GlobalMetadata: Any = _message_class(_POOL, "GlobalMetadata")
Node: Any = _message_class(_POOL, "Node")
IOInfo: Any = _message_class(_POOL, "IOInfo")
Tensor: Any = _message_class(_POOL, "Tensor")
BoolList: Any = _message_class(_POOL, "BoolList")

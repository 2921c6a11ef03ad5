"""The part of gnostic's openapi_v2 protobuf schema (openapiv2/OpenAPIv2.proto in
github.com/google/gnostic-models, Apache-2.0) that a swagger document of definitions needs,
declared with protobuf's descriptor types so that protobuf itself encodes it: kubectl
decodes /openapi/v2 as openapi.v2.Document. Names and field numbers are gnostic's; fields
left out (paths, parameters, security...) are absent from the wire, which proto3 allows.
Any keeps only its `yaml` field: kube-openapi reads vendor extensions from it."""

from __future__ import annotations

from typing import Any

import yaml
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto
STRING, BOOL, MESSAGE = F.TYPE_STRING, F.TYPE_BOOL, F.TYPE_MESSAGE
ONE, MANY = F.LABEL_OPTIONAL, F.LABEL_REPEATED

# message -> [(field, number, type, label, message type or None, oneof index or None)]
MESSAGES: dict[str, list[tuple]] = {
    "Document": [
        ("swagger", 1, STRING, ONE, None),
        ("info", 2, MESSAGE, ONE, "Info"),
        ("definitions", 9, MESSAGE, ONE, "Definitions"),
    ],
    "Info": [("title", 1, STRING, ONE, None), ("version", 2, STRING, ONE, None)],
    "Definitions": [("additional_properties", 1, MESSAGE, MANY, "NamedSchema")],
    "NamedSchema": [("name", 1, STRING, ONE, None), ("value", 2, MESSAGE, ONE, "Schema")],
    "NamedAny": [("name", 1, STRING, ONE, None), ("value", 2, MESSAGE, ONE, "Any")],
    "Any": [("yaml", 2, STRING, ONE, None)],
    "TypeItem": [("value", 1, STRING, MANY, None)],
    "ItemsItem": [("schema", 1, MESSAGE, MANY, "Schema")],
    "Properties": [("additional_properties", 1, MESSAGE, MANY, "NamedSchema")],
    "AdditionalPropertiesItem": [("schema", 1, MESSAGE, ONE, "Schema", 0), ("boolean", 2, BOOL, ONE, None, 0)],
    "Schema": [
        ("_ref", 1, STRING, ONE, None),
        ("format", 2, STRING, ONE, None),
        ("title", 3, STRING, ONE, None),
        ("description", 4, STRING, ONE, None),
        ("default", 5, MESSAGE, ONE, "Any"),
        ("required", 19, STRING, MANY, None),
        ("enum", 20, MESSAGE, MANY, "Any"),
        ("additional_properties", 21, MESSAGE, ONE, "AdditionalPropertiesItem"),
        ("type", 22, MESSAGE, ONE, "TypeItem"),
        ("items", 23, MESSAGE, ONE, "ItemsItem"),
        ("properties", 25, MESSAGE, ONE, "Properties"),
        ("vendor_extension", 31, MESSAGE, MANY, "NamedAny"),
    ],
}
ONEOFS = {"AdditionalPropertiesItem": ["oneof"]}


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="openapiv2/OpenAPIv2.proto", package="openapi.v2", syntax="proto3")
    for name, fields in MESSAGES.items():
        msg = fd.message_type.add(name=name)
        for oneof in ONEOFS.get(name, []):
            msg.oneof_decl.add(name=oneof)
        for field, number, kind, label, type_name, *oneof in fields:
            f = msg.field.add(name=field, number=number, type=kind, label=label)
            if type_name:
                f.type_name = f".openapi.v2.{type_name}"
            if oneof and oneof[0] is not None:
                f.oneof_index = oneof[0]
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
_classes = {
    name: message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"openapi.v2.{name}")) for name in MESSAGES
}
Document, Info, NamedSchema = _classes["Document"], _classes["Info"], _classes["NamedSchema"]


def _any(value: Any) -> Any:
    return _classes["Any"](yaml=yaml.safe_dump(value, default_flow_style=False))


def schema(node: dict) -> Any:
    """A swagger 2.0 schema (a JSON mapping) as an openapi.v2.Schema message."""
    msg = _classes["Schema"]()
    for key, value in node.items():
        if key == "$ref":
            msg._ref = value
        elif key in ("format", "title", "description"):
            setattr(msg, key, value)
        elif key == "default":
            msg.default.CopyFrom(_any(value))
        elif key == "required":
            msg.required.extend(value)
        elif key == "enum":
            msg.enum.extend(_any(v) for v in value)
        elif key == "type":
            msg.type.value.append(value)
        elif key == "items":
            msg.items.schema.append(schema(value))
        elif key == "properties":
            msg.properties.SetInParent()  # an object with no properties still says so
            msg.properties.additional_properties.extend(NamedSchema(name=p, value=schema(s)) for p, s in value.items())
        elif key == "additionalProperties":
            if isinstance(value, bool):
                msg.additional_properties.boolean = value
            else:
                msg.additional_properties.schema.CopyFrom(schema(value))
        elif key.startswith("x-"):
            msg.vendor_extension.add(name=key, value=_any(value))
    return msg

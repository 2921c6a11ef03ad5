"""/openapi/v2 and /openapi/v3, generated from the schemas the tests already check manifests
against: kubernetes-validate's bundled definitions for the Kubernetes minor the fake reports
(discovery.VERSION), and the vendored JobSet and Kueue CRDs (crds/). kubectl reads them as it reads a
real API server's:

  * /openapi/v3 lists a document per group-version; /openapi/v3/api/v1 and
    /openapi/v3/apis/<group>/<version> hold, for each resource the fake serves, its create,
    update and patch operations with their `fieldValidation` parameter (so kubectl leaves
    the validation of one object to the server, as with any server since 1.27) and, under
    components.schemas, the kind's schema and every schema it refers to (`kubectl explain`).
  * /openapi/v2 is the swagger 2.0 document of the same definitions. kubectl asks for it as
    protobuf only (`Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`,
    gnostic's openapi_v2.Document), and reads it for client-side validation: of a `kind:
    List` (its v3 check says a List takes no fieldValidation), which is what `launcher run
    --dry-run -o yaml` prints. Other clients get JSON. The document carries definitions
    only, no paths: kubectl's v2 readers look kinds up by x-kubernetes-group-version-kind.

Schema conversion: the bundled JSON schemas spell optional fields as `type: [T, "null"]`
and constrain apiVersion and kind with enums; swagger has neither. IntOrString and Quantity
become strings of their formats, as the real documents have them. In the CRD, a node that
keeps unknown fields loses its type and properties in v2, as the API server publishes it,
so kubectl validates nothing below it.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from typing import Any

from tests.fakes.kube.common import status_body
from tests.fakes.kube.resources import VISIBILITY_GROUP, Registry, Resource

PROTOBUF_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
# What the answer says it is: a media type without the `@`, which Go's mime parser refuses.
PROTOBUF_V2_ANSWER = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
# The bundled schemas' spelling of the two kinds of value that are a string or a number.
STRING_FORMATS = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "int-or-string",
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "quantity",
}


def answer(registry: Registry, parts: list[str], accept: str) -> tuple[int, str, bytes]:
    """(status, content type, body) for GET /openapi/..."""
    if parts == ["openapi", "v2"]:
        if PROTOBUF_V2 in accept or PROTOBUF_V2_ANSWER in accept:
            return 200, PROTOBUF_V2_ANSWER, v2_protobuf(registry.flags)
        return 200, "application/json", json.dumps(v2_document(registry.flags)).encode()
    if parts == ["openapi", "v3"]:
        # kubectl caches each document on disk under its hash, as it would a real server's.
        paths = {
            _gv_path(g, v): {
                "serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}?hash="
                + hashlib.sha256(v3_bytes(registry.flags, g, v)).hexdigest()
            }
            for g, v in _group_versions(registry)
        }
        return 200, "application/json", json.dumps({"paths": paths}).encode()
    if len(parts) >= 4 and parts[:2] == ["openapi", "v3"]:
        gv = "/".join(parts[2:])
        for g, v in _group_versions(registry):
            if _gv_path(g, v) == gv:
                return 200, "application/json", v3_bytes(registry.flags, g, v)
    return (
        404,
        "application/json",
        json.dumps(status_body(404, "NotFound", "the server could not find the requested resource")).encode(),
    )


# --- the definitions ------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def kubernetes_definitions() -> dict[str, dict]:
    """kubernetes-validate's definitions for the newest bundled minor not past the fake's."""
    from kubernetes_validate import utils

    from tests.fakes.kube.discovery import VERSION

    ours = (int(VERSION["major"]), int(VERSION["minor"]))
    version = [v for v in utils.all_versions() if tuple(int(p) for p in v.split(".")[:2]) <= ours][-1]
    return utils.schema_contents(f"kubernetes-json-schema/v{version}-local/_definitions.json", version)["$defs"]


@functools.lru_cache(maxsize=4)
def swagger_definitions(flags: tuple[bool, bool]) -> dict[str, dict]:
    """Every definition the served kinds refer to, transitively, as swagger 2.0 schemas
    (flags: Registry.flags, which custom resources are served)."""
    defs = {name: _from_json_schema(schema, name) for name, schema in kubernetes_definitions().items()}
    resources = [r for r in Registry(jobset=flags[0], kueue=flags[1]).resources if r.group != VISIBILITY_GROUP]
    for r in resources:
        if r.crd:
            defs[definition_name(r)] = crd_definition(r)
    return {name: defs[name] for name in _closure([definition_name(r) for r in resources], defs)}


def definition_name(resource: Resource) -> str:
    """The name a real API server gives the kind's definition."""
    if resource.crd:  # a custom resource: the group reversed (io.x-k8s.jobset.v1alpha2.JobSet)
        return ".".join(reversed(resource.group.split("."))) + "." + resource.version + "." + resource.kind
    for name, schema in kubernetes_definitions().items():
        if {"group": resource.group, "version": resource.version, "kind": resource.kind} in schema.get(
            "x-kubernetes-group-version-kind", []
        ):
            return name
    raise KeyError(f"kubernetes-validate has no schema for {resource.api_version} {resource.kind}")


def crd_definition(resource: Resource) -> dict:
    from tests.fakes.kube.crd import schema_of

    schema = _from_crd(copy.deepcopy(schema_of(resource.crd, resource.version)))
    schema["properties"]["metadata"] = {
        "$ref": f"#/definitions/{OBJECT_META}",
        "description": "Standard object's metadata.",
    }
    schema["x-kubernetes-group-version-kind"] = [
        {"group": resource.group, "kind": resource.kind, "version": resource.version}
    ]
    return schema


def _from_json_schema(node: Any, name: str | None = None) -> Any:
    """One bundled JSON-schema node as swagger 2.0."""
    if name in STRING_FORMATS:
        return {"type": "string", "format": STRING_FORMATS[name]}
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref":
            out[key] = value.replace("#/$defs/", "#/definitions/")
        elif key == "type":
            types = [t for t in (value if isinstance(value, list) else [value]) if t != "null"]
            out[key] = types[0]
        elif key == "properties":
            out[key] = {p: _without_kind_enum(p, _from_json_schema(s)) for p, s in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _from_json_schema(value)
        elif key not in ("oneOf", "anyOf", "allOf", "not", "$schema", "$id"):
            out[key] = value
    return out


def _without_kind_enum(prop: str, schema: dict) -> dict:
    if prop in ("apiVersion", "kind"):
        schema.pop("enum", None)
    return schema


def _from_crd(node: Any) -> Any:
    """One node of a CRD's openAPIV3Schema as the API server publishes it in v2."""
    if not isinstance(node, dict):
        return node
    if node.get("x-kubernetes-int-or-string"):
        return {k: v for k, v in node.items() if k in ("description",)} | {"type": "string", "format": "int-or-string"}
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return {k: v for k, v in node.items() if k in ("description", "x-kubernetes-preserve-unknown-fields")}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {p: _from_crd(s) for p, s in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _from_crd(value)
        elif key not in ("oneOf", "anyOf", "allOf", "not", "nullable", "x-kubernetes-validations"):
            out[key] = value
    return out


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"].rsplit("/", 1)[-1]} if isinstance(node.get("$ref"), str) else set()
        for value in node.values():
            found |= _refs(value)
        return found
    if isinstance(node, list):
        return set().union(*map(_refs, node)) if node else set()
    return set()


def _closure(roots: list[str], defs: dict[str, dict]) -> list[str]:
    seen: list[str] = []
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        todo += sorted(_refs(defs[name]) - set(seen))
    return sorted(seen)


# --- v2 -------------------------------------------------------------------------------------------
def v2_document(flags: tuple[bool, bool]) -> dict:
    from tests.fakes.kube.discovery import VERSION

    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes (fake)", "version": VERSION["gitVersion"]},
        "paths": {},
        "definitions": swagger_definitions(flags),
    }


@functools.lru_cache(maxsize=4)
def v2_protobuf(flags: tuple[bool, bool]) -> bytes:
    from tests.fakes.kube import openapi_v2_proto as pb

    doc = v2_document(flags)
    message = pb.Document(swagger=doc["swagger"], info=pb.Info(**doc["info"]))
    message.definitions.additional_properties.extend(
        pb.NamedSchema(name=name, value=pb.schema(schema)) for name, schema in doc["definitions"].items()
    )
    return message.SerializeToString()


# --- v3 -------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=16)
def v3_bytes(flags: tuple[bool, bool], group: str, version: str) -> bytes:
    return json.dumps(v3_document(flags, Registry(jobset=flags[0], kueue=flags[1]).in_group(group, version))).encode()


def v3_document(flags: tuple[bool, bool], resources: list[Resource]) -> dict:
    """The group-version's operations (with fieldValidation) and the schemas of its kinds."""
    from tests.fakes.kube.discovery import VERSION

    defs = swagger_definitions(flags)
    paths = {}
    for r in resources:
        base = "/" + _gv_path(r.group, r.version) + ("/namespaces/{namespace}" if r.namespaced else "")
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        param = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]
        body = {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{definition_name(r)}"}}}}
        paths[f"{base}/{r.plural}"] = {
            "post": {"x-kubernetes-group-version-kind": gvk, "parameters": param, "requestBody": body}
        }
        paths[f"{base}/{r.plural}/{{name}}"] = {
            "patch": {"x-kubernetes-group-version-kind": gvk, "parameters": param},
            "put": {"x-kubernetes-group-version-kind": gvk, "parameters": param, "requestBody": body},
        }
    names = _closure([definition_name(r) for r in resources], defs)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (fake)", "version": VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {n: _v3_schema(defs[n]) for n in names}},
    }


def _v3_schema(node: Any) -> Any:
    """A swagger 2.0 schema as OpenAPI 3.0: refs under components, and a ref with siblings
    (its description) wrapped in allOf, as a real server writes it."""
    if not isinstance(node, dict):
        return node
    out = {k: (_v3_schema(v) if k in ("items", "additionalProperties") else v) for k, v in node.items()}
    if "properties" in node:
        out["properties"] = {p: _v3_schema(s) for p, s in node["properties"].items()}
    if "$ref" in node:
        ref = {"$ref": node["$ref"].replace("#/definitions/", "#/components/schemas/")}
        rest = {k: v for k, v in out.items() if k != "$ref"}
        return {"allOf": [ref], **rest} if rest else ref
    return out


def _group_versions(registry: Registry) -> list[tuple[str, str]]:
    return sorted({(r.group, r.version) for r in registry.resources if r.group != VISIBILITY_GROUP})


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"

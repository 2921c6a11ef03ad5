"""A CRD's openAPIV3Schema applied as the API server applies it to a custom resource:
on decoding, defaults and unknown fields (pruned, or rejected under
fieldValidation=Strict); after mutating admission, validation of types, enums, bounds
and required fields (with jsonschema). CEL rules (x-kubernetes-validations) are not
evaluated."""

from __future__ import annotations

import contextvars
import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from tests.fakes.kube.common import ApiError, invalid

CRDS = Path(__file__).parent / "crds"
STRICT = contextvars.ContextVar("strict_field_validation", default=False)
"""True while the HTTP layer serves a request with fieldValidation=Strict (kubectl's default)."""


@functools.cache
def load(filename: str) -> dict:
    with open(CRDS / filename) as f:
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def version_of(filename: str, version: str) -> dict:
    """One entry of the CRD's spec.versions."""
    for v in load(filename)["spec"]["versions"]:
        if v["name"] == version:
            return v
    raise KeyError(f"{filename} has no version {version}")


def schema_of(filename: str, version: str) -> dict:
    return version_of(filename, version)["schema"]["openAPIV3Schema"]


def apply_defaults(obj: Any, schema: dict) -> None:
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
        for key, value in obj.items():
            if key in props:
                apply_defaults(value, props[key])
            elif isinstance(schema.get("additionalProperties"), dict):
                apply_defaults(value, schema["additionalProperties"])
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            apply_defaults(item, schema["items"])


def unknown_fields(obj: Any, schema: dict, path: str = "") -> list[str]:
    """Paths of fields the schema does not know (metadata is the server's own)."""
    out: list[str] = []
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return out
    if isinstance(obj, dict) and schema.get("type") == "object":
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, value in obj.items():
            where = f"{path}.{key}" if path else key
            if props is not None and key in props:
                if where != "metadata":
                    out += unknown_fields(value, props[key], where)
            elif isinstance(extra, dict):
                out += unknown_fields(value, extra, where)
            elif props is not None and not extra:
                out.append(where)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            out += unknown_fields(item, schema["items"], f"{path}[{i}]")
    return out


def prune(obj: Any, paths: list[str]) -> None:
    import re

    for path in paths:
        parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
        node = obj
        for part in parts[:-1]:
            node = node[int(part[1:-1])] if part.startswith("[") else node[part]
        node.pop(parts[-1], None)


def decode(obj: dict, schema: dict, *, kind: str, group: str, strict: bool | None = None) -> list[str]:
    """What happens as the server decodes a custom resource: schema defaults, then unknown
    fields pruned (or, under fieldValidation=Strict, rejected). Returns the pruned paths."""
    strict = STRICT.get() if strict is None else strict
    apply_defaults(obj, schema)
    unknown = unknown_fields(obj, schema)
    if unknown and strict:
        name = (obj.get("metadata") or {}).get("name", "")
        raise ApiError(
            400,
            "BadRequest",
            f'{kind}.{group} "{name}" is invalid: strict decoding error: '
            + ", ".join(f'unknown field "{u}"' for u in unknown),
        )
    prune(obj, unknown)
    return unknown


def validate(obj: dict, schema: dict, *, kind: str, group: str) -> None:
    """The schema's checks (after mutating admission, as on a real server)."""
    import jsonschema

    validator = jsonschema.Draft7Validator(_no_metadata(schema))
    errors = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        causes = [
            (
                ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in e.absolute_path).replace(".[", "["),
                e.message,
            )
            for e in errors[:10]
        ]
        raise invalid(kind, (obj.get("metadata") or {}).get("name", ""), causes, group)


def _no_metadata(schema: dict) -> dict:
    """The schema without its `metadata` (the server validates metadata itself)."""
    out = dict(schema)
    out["properties"] = {k: v for k, v in schema.get("properties", {}).items() if k != "metadata"}
    return out

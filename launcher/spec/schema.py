"""The run YAML's JSON Schema, for editors (`launcher schema`).

Generated from the pydantic models (models.py), then widened to what the loader
accepts before the models see a document: mcli's legacy spellings (compat.py), the
field names beside their aliases (the models populate by name), and the values the
models' before-validators turn into their types (durations with units, env values
that are numbers). An editor must not flag a YAML that `launcher validate` takes;
what only the loader can judge (a gpu_type on a cluster, a secret's existence) stays
the loader's.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from launcher.spec.compat import LEGACY_TOP_LEVEL
from launcher.spec.models import DURATION, QUANTITY, RunSpec

DIALECT = "https://json-schema.org/draft/2020-12/schema"

_DURATION = {
    "anyOf": [{"type": "number", "minimum": 0}, {"type": "string", "pattern": DURATION.pattern}],
    "description": "Seconds, or a number with a unit: 500ms, 10s, 5m, 1h.",
}
_ENV_VALUE = {"type": ["string", "number", "boolean"]}


def _models(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every model reachable from `model`, by the title pydantic gives its $defs entry."""
    found: dict[str, type[BaseModel]] = {}

    def walk(m: type[BaseModel]) -> None:
        if m.__name__ in found:
            return
        found[m.__name__] = m
        for field in m.model_fields.values():
            for t in _types(field.annotation):
                walk(t)

    walk(model)
    return found


def _types(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [t for arg in getattr(annotation, "__args__", ()) for t in _types(arg)]


def _add_field_names(schema: dict, model: type[BaseModel]) -> None:
    """A field with an alias (watchdogEnabled) is accepted by its own name too."""
    properties = schema.get("properties", {})
    for name, field in model.model_fields.items():
        if field.alias and field.alias != name and field.alias in properties:
            properties.setdefault(name, copy.deepcopy(properties[field.alias]))


def _legacy(target: dict, since: str) -> dict:
    return {
        **copy.deepcopy(target),
        "deprecated": True,
        "description": f"Deprecated (mcli's older spelling): use {since}.",
    }


def run_spec_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a run YAML."""
    schema = RunSpec.model_json_schema(mode="validation")
    defs = schema["$defs"]
    for title, model in _models(RunSpec).items():
        _add_field_names(defs.get(title, schema) if model is not RunSpec else schema, model)

    top = schema["properties"]
    compute = defs["Compute"]["properties"]
    compute["memory"]["anyOf"][0]["pattern"] = QUANTITY.pattern
    scheduling = defs["Scheduling"]["properties"]
    scheduling["retryOnSystemFailure"] = _legacy(
        scheduling["retry_on_system_failure"], "scheduling.retry_on_system_failure"
    )
    for bound in ("first", "max"):
        defs["RetryBackoff"]["properties"][bound] = {
            **_DURATION,
            "default": defs["RetryBackoff"]["properties"][bound].get("default"),
        }

    hang = defs["Resilience"]["properties"]["hang_timeout"]
    defs["Resilience"]["properties"]["hang_timeout"] = {
        "anyOf": [*_DURATION["anyOf"], {"type": "null"}],
        "description": hang.get("description", _DURATION["description"]),
        "default": None,
    }

    # compat.py moves these to where they belong before the models see them.
    for legacy, path in LEGACY_TOP_LEVEL.items():
        target = top[path[0]] if len(path) == 1 else compute[path[1]]
        top[legacy] = _legacy(target, ".".join(path))
    schema["required"] = [r for r in schema.get("required", []) if r != "name"]
    schema["anyOf"] = [{"required": ["name"]}, {"required": ["run_name"]}]
    top["env_variables"] = {
        "description": "Environment variables of every rank: NAME: VALUE (or mcli's older list of {key, value}).",
        "anyOf": [
            {
                "type": "object",
                "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
                "additionalProperties": _ENV_VALUE,
            },
            {
                "type": "array",
                "deprecated": True,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["key", "value"],
                    "properties": {"key": {"type": "string"}, "value": _ENV_VALUE},
                },
            },
        ],
    }
    for mapping in ("parameters", "metadata"):
        top[mapping] = {"anyOf": [top[mapping], {"type": "null"}], "default": {}}
    return {
        "$schema": DIALECT,
        **schema,
        "title": "launcher run YAML",
        "description": "A run for `launcher run -f`: mcli's run YAML, plus launcher's own fields.",
    }

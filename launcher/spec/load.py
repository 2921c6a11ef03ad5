"""Load a run YAML into a `RunSpec`, with errors that point at file:line:column.

Steps: parse with positions (`yamlpos`), rewrite legacy mcli spellings
(`compat`), apply command-line overrides, validate with pydantic, and translate
every pydantic error into a `SpecIssue` located in the file, with a did-you-mean
for unknown fields.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from launcher.errors import SpecError, SpecIssue
from launcher.spec.compat import LEGACY_TOP_LEVEL, apply_compat
from launcher.spec.models import INTEGRATION_TYPES, RunSpec
from launcher.spec.yamlpos import Located, load_located, read_file, safe_load


@dataclass
class Overrides:
    """Command-line changes to a spec, applied before validation."""

    name: str | None = None
    image: str | None = None
    gpus: int | None = None
    gpu_type: str | None = None
    nodes: int | None = None
    cluster: str | None = None
    priority: str | None = None
    max_retries: int | None = None
    env: list[str] = field(default_factory=list)
    """KEY=VALUE"""
    set: list[str] = field(default_factory=list)
    """dotted.path=YAML-value, e.g. parameters.optimizer.lr=1e-4"""


@dataclass
class LoadedSpec:
    spec: RunSpec
    warnings: list[str]
    file: str | None


OVERRIDE = "command line"


def load_spec(path: str | Path, overrides: Overrides | None = None) -> LoadedSpec:
    return load_spec_text(read_file(path, "a run spec file"), str(path), overrides)


def load_spec_text(text: str | bytes, file: str | None = None, overrides: Overrides | None = None) -> LoadedSpec:
    located = load_located(text, file)
    if not isinstance(located.data, dict):
        kind = "a list" if isinstance(located.data, list) else f"a {type(located.data).__name__} ({located.data!r:.40})"
        raise SpecError([SpecIssue(f"the top level must be a mapping of fields (name, image, command, ...), got {kind}", file=file, line=1, column=1)])
    warnings: list[str] = []
    issues = apply_compat(located, warnings)
    sources: dict[tuple, str] = {}
    if overrides:
        issues += _apply_overrides(located, overrides, sources)
    if issues:
        raise SpecError(issues)
    try:
        spec = RunSpec.model_validate(located.data)
    except ValidationError as e:
        raise SpecError(_issues_from(e, located, sources)) from None
    return LoadedSpec(spec=spec, warnings=warnings, file=file)


# ---------------------------------------------------------------- overrides


def _set_path(data: dict, keys: list[str], value: Any) -> None:
    node: Any = data
    for k in keys[:-1]:
        if isinstance(node, list) and k.isdigit() and int(k) < len(node):
            node = node[int(k)]
            continue
        if not isinstance(node, dict):
            raise ValueError(f"cannot set {'.'.join(keys)}: {k!r} is inside a non-mapping value")
        if not isinstance(node.get(k), dict | list):
            node[k] = {}
        node = node[k]
    last = keys[-1]
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise ValueError(f"cannot set {'.'.join(keys)}: the parent is not a mapping")


def _apply_overrides(located: Located, o: Overrides, sources: dict[tuple, str]) -> list[SpecIssue]:
    data = located.data
    issues: list[SpecIssue] = []

    def put(path: tuple[str, ...], value: Any, flag: str) -> None:
        try:
            _set_path(data, list(path), value)
        except ValueError as e:
            issues.append(SpecIssue(str(e), field=".".join(path), file=flag))
            return
        sources[path] = flag

    for attr, path in (("name", ("name",)), ("image", ("image",)), ("priority", ("scheduling", "priority")),
                       ("max_retries", ("scheduling", "max_retries"))):
        value = getattr(o, attr)
        if value is not None:
            put(path, value, f"--{attr.replace('_', '-')} {value}")
    for attr in ("gpus", "gpu_type", "nodes", "cluster"):
        value = getattr(o, attr)
        if value is not None:
            put(("compute", attr), value, f"--{attr.replace('_', '-')} {value}")
    for item in o.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            issues.append(SpecIssue(f"--env takes KEY=VALUE, got {item!r}", file=OVERRIDE))
            continue
        if not isinstance(data.get("env_variables"), dict):
            data["env_variables"] = {}
        put(("env_variables", key), value, f"--env {key}=…")  # the value stays off the screen
    for item in o.set:
        dotted, sep, text = item.partition("=")
        keys = [k for k in dotted.split(".")]
        if not sep or not dotted or not all(keys):
            issues.append(SpecIssue(f"--set takes path.to.field=VALUE, got {item!r}", file=OVERRIDE))
            continue
        try:
            value = safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        put(tuple(keys), value, f"--set {item}")
    return issues


# ---------------------------------------------------------------- errors


def _unwrap(tp: Any) -> list[Any]:
    """The concrete types inside Optional/Union/Annotated/list."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        out = []
        for a in typing.get_args(tp):
            out.extend(_unwrap(a))
        return out
    return [tp]


def _model_at(path: tuple, data: Any) -> type[BaseModel] | None:
    """The pydantic model that validates the mapping at `path`, if any."""
    model: type[BaseModel] | None = RunSpec
    items: list[type[BaseModel]] = []  # the models a list field holds, chosen at the index step
    node = data
    for part in path:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and part < len(node) else None
            model, items = _pick(items, node), []
            continue
        fld = model.model_fields.get(part) if model else None
        if fld is None:
            return None
        node = node.get(part) if isinstance(node, dict) else None
        model = None
        for t in _unwrap(fld.annotation):
            if typing.get_origin(t) is list:
                items = [x for x in _unwrap(typing.get_args(t)[0]) if isinstance(x, type) and issubclass(x, BaseModel)]
            elif isinstance(t, type) and issubclass(t, BaseModel):
                model = t
    return model


def _pick(candidates: list[type[BaseModel]], node: Any) -> type[BaseModel] | None:
    """The member of a discriminated union that validates `node`."""
    if len(candidates) == 1:
        return candidates[0]
    kind = node.get("integration_type") if isinstance(node, dict) else None
    for m in candidates:
        lit = m.model_fields.get("integration_type")
        if lit is not None and kind in typing.get_args(lit.annotation):
            return m
    return None


def _clean_loc(loc: tuple, data: Any) -> tuple:
    """Drop the discriminator tags pydantic inserts into union locations."""
    out: list = []
    node = data
    for i, part in enumerate(loc):
        # The tag comes right after the item's index; a field of the same name (git_repo's
        # git_repo) may follow it.
        tag_position = len(out) >= 2 and out[-2] == "integrations" and isinstance(out[-1], int) and loc[i - 1] == out[-1]
        if tag_position and isinstance(node, dict) and node.get("integration_type") == part:
            continue
        out.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(out)


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _message(err: dict, path: tuple, data: Any) -> str:
    kind = err["type"]
    got = _describe(err.get("input"))
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        key = path[-1]
        model = _model_at(path[:-1], data)
        names = list(model.model_fields) if model else []
        if path[:-1] == ():
            names += list(LEGACY_TOP_LEVEL)
        guess = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
        hint = f" (did you mean {guess[0]!r}?)" if guess else ""
        where = ".".join(str(p) for p in path[:-1]) or "the run spec"
        listed = [n for n in names if not (path[:-1] == () and n in LEGACY_TOP_LEVEL)]
        return f"unknown field{hint}; {where} takes: {', '.join(listed)}"
    if kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        if kind == "greater_than_equal" and bound == 1:
            return f"must be a positive integer, got {got}"
        if kind == "greater_than_equal" and bound == 0:
            return f"must be zero or more, got {got}"
        return f"must be greater than {bound}, got {got}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"must be an integer, got {got}"
    if kind in ("float_parsing", "float_type"):
        return f"must be a number, got {got}"
    if kind in ("bool_parsing", "bool_type"):
        return f"must be true or false, got {got}"
    if kind in ("string_type",):
        return f"must be a string, got {got}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a mapping, got {got}"
    if kind == "list_type":
        return f"must be a list, got {got}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tag = ctx.get("tag")
        guess = difflib.get_close_matches(str(tag), INTEGRATION_TYPES, n=1, cutoff=0.6) if tag else []
        hint = f" (did you mean {guess[0]!r}?)" if guess else ""
        if kind == "union_tag_not_found":
            return f"needs integration_type, one of: {', '.join(INTEGRATION_TYPES)}"
        return f"must be one of {', '.join(INTEGRATION_TYPES)}, got {tag!r}{hint}"
    if kind == "value_error":
        return err["msg"].removeprefix("Value error, ")
    return err["msg"]


def _issues_from(e: ValidationError, located: Located, sources: dict[tuple, str]) -> list[SpecIssue]:
    issues = []
    seen = set()
    for err in e.errors(include_url=False):
        path = _clean_loc(tuple(err["loc"]), located.data)
        if err["type"] == "union_tag_invalid":
            path = path + ("integration_type",)  # point at the bad tag, not the whole item
        dotted = ".".join(str(p) for p in path)
        message = _message(err, path, located.data)
        if (dotted, message) in seen:
            continue
        seen.add((dotted, message))
        # The flag that set this field, or that created it (--set bogus.field=1 makes `bogus`).
        source = next((flag for p, flag in sources.items() if path[: len(p)] == p or p[: len(path)] == path), None)
        if source:
            issues.append(SpecIssue(message, field=dotted, file=source))
            continue
        line, col = located.where(path, key=err["type"] in ("extra_forbidden",))
        if err["type"] == "missing":
            line, col = located.where(path[:-1])
        issues.append(SpecIssue(message, field=dotted, file=located.file, line=line, column=col))
    issues.sort(key=lambda i: (i.line or 0, i.column or 0))
    return issues

"""Pydantic validation errors -> user messages with a did-you-mean, for every config we load
(the run spec and both trainers' configs).

`validation_issues` walks each error's location through the data and the models together,
so that it can drop the tags pydantic inserts into union locations (a discriminator value,
a member's type name such as `int` or `TokenizerConfig`), find the model that rejected an
unknown key (through lists, optionals and unions of models), and list that model's fields.
How an issue is placed (file:line, or the command-line flag it came from) stays with the
caller, through `make`.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from launcher.errors import SpecIssue

# make(field_path, at_path, message, key) -> SpecIssue: at_path is where to point in the file
# (the parent mapping for a missing field), key says to point at the key rather than its value.
MakeIssue = Callable[[tuple, tuple, str, bool], SpecIssue]


def _unwrap(tp: Any) -> list[Any]:
    """The concrete types inside Optional/Union/Annotated."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        out = []
        for a in typing.get_args(tp):
            out.extend(_unwrap(a))
        return out
    return [tp]


def _models(types_: list[Any]) -> list[type[BaseModel]]:
    return [t for t in types_ if isinstance(t, type) and issubclass(t, BaseModel)]


def _field_types(annotation: Any) -> tuple[list[type[BaseModel]], list[type[BaseModel]]]:
    """(models the field itself may be, models its list/tuple/dict items may be)."""
    direct: list[Any] = []
    items: list[Any] = []
    for t in _unwrap(annotation):
        origin = typing.get_origin(t)
        if origin in (list, tuple, set, frozenset, Sequence):
            for a in typing.get_args(t):
                items.extend(_unwrap(a))
        elif origin is dict:
            args = typing.get_args(t)
            if len(args) == 2:
                items.extend(_unwrap(args[1]))
        else:
            direct.append(t)
    return _models(direct), _models(items)


def _discriminators(candidates: list[type[BaseModel]]) -> dict[str, dict[Any, type[BaseModel]]]:
    """{field: {literal value: model}} for the Literal fields that tell union members apart."""
    out: dict[str, dict[Any, type[BaseModel]]] = {}
    for m in candidates:
        for name, fld in m.model_fields.items():
            for t in _unwrap(fld.annotation):
                if typing.get_origin(t) is typing.Literal:
                    for v in typing.get_args(t):
                        out.setdefault(name, {})[v] = m
    return {k: v for k, v in out.items() if len(v) > 1 or len(candidates) == 1}


def _pick(candidates: list[type[BaseModel]], node: Any) -> list[type[BaseModel]]:
    """Narrow a union of models to the member the node's discriminator names."""
    if len(candidates) <= 1 or not isinstance(node, dict):
        return candidates
    for name, by_value in _discriminators(candidates).items():
        value = node.get(name)
        # A discriminator can only be a scalar; a list or mapping there names no member.
        chosen = by_value.get(value) if isinstance(value, str | int | float | bool) else None
        if chosen is not None:
            return [chosen]
    return candidates


class _Walk:
    """One error location followed through the data and the models: `path` is the location
    without union tags, `models` the models the node there may be, `parent_models` those of
    the mapping that holds it."""

    def __init__(self, root: type[BaseModel], data: Any, loc: tuple):
        self.path: list[Any] = []
        self.models: list[type[BaseModel]] = [root]
        self.parent_models: list[type[BaseModel]] = []
        self.union: list[type[BaseModel]] = []  # the members, where the node is a union of models
        node = data
        items: list[type[BaseModel]] = []  # what the items of a list or dict field may be
        for i, part in enumerate(loc):
            if isinstance(part, int) or (items and isinstance(node, dict) and part in node):
                if isinstance(node, dict):
                    node = node.get(part)
                else:
                    node = node[part] if isinstance(node, list | tuple) and 0 <= part < len(node) else None
                self.parent_models, self.models = self.models, _pick(items, node)
                self.union, items = (items if len(items) > 1 else []), []
                self.path.append(part)
                continue
            if self._skip_tag(part, node, i == len(loc) - 1):
                continue
            self.path.append(part)
            self.parent_models = self.models
            direct: list[type[BaseModel]] = []
            items = []
            for m in self.models:
                if part in m.model_fields:
                    d, it = _field_types(m.model_fields[part].annotation)
                    direct += d
                    items += it
            node = node.get(part) if isinstance(node, dict) else None
            self.models = _pick(direct, node)
            self.union = direct if len(direct) > 1 else []

    def _skip_tag(self, part: str, node: Any, is_last: bool) -> bool:
        """Is `part` a tag pydantic inserted for a union member? Narrows `models` when it names one."""
        if self.union:
            named = [m for m in self.union if m.__name__ == part]
            if not named and isinstance(node, dict):
                for field_name, by_value in _discriminators(self.union).items():
                    if part in by_value and node.get(field_name) == part:
                        named = [by_value[part]]
            if named:
                self.models, self.union = named, []
                return True
        if any(part in m.model_fields for m in self.models):
            return False
        if isinstance(node, dict):
            return part not in node and not is_last
        # A scalar has no keys: what follows it is a member's type name (int, str, literal[...]).
        return node is not None or not is_last


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _message(err: ErrorDetails, walk: _Walk, what: str, aliases: Sequence[str]) -> str:
    kind = err["type"]
    path = tuple(walk.path)
    got = _describe(err.get("input"))
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        names: list[str] = []
        for m in walk.parent_models:
            names += [n for n in m.model_fields if n not in names]
        top = len(path) == 1
        guess = difflib.get_close_matches(str(path[-1]), names + (list(aliases) if top else []), n=1, cutoff=0.6)
        hint = f" (did you mean {guess[0]!r}?)" if guess else ""
        where = ".".join(str(p) for p in path[:-1]) or what
        return f"unknown field{hint}; {where} takes: {', '.join(names)}"
    if kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        if kind == "greater_than_equal" and bound == 1:
            return f"must be a positive integer, got {got}"
        if kind == "greater_than_equal" and bound == 0:
            return f"must be zero or more, got {got}"
        return f"must be greater than {'or equal to ' if kind == 'greater_than_equal' else ''}{bound}, got {got}"
    if kind in ("less_than", "less_than_equal"):
        bound = ctx.get("lt", ctx.get("le"))
        return f"must be less than {'or equal to ' if kind == 'less_than_equal' else ''}{bound}, got {got}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"must be an integer, got {got}"
    if kind == "finite_number":
        return f"must be a finite number, got {got}"
    if kind in ("float_parsing", "float_type"):
        return f"must be a number, got {got}"
    if kind in ("bool_parsing", "bool_type"):
        return f"must be true or false, got {got}"
    if kind == "string_type":
        return f"must be a string, got {got}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a mapping, got {got}"
    if kind in ("list_type", "tuple_type"):
        return f"must be a list, got {got}"
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}, got {got}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        field_name = str(ctx.get("discriminator", "")).strip("'")
        values = [str(v) for v in _discriminators(walk.models).get(field_name, {})]
        if kind == "union_tag_not_found":
            return f"needs {field_name}, one of: {', '.join(values)}"
        tag = ctx.get("tag")
        guess = difflib.get_close_matches(str(tag), values, n=1, cutoff=0.6) if tag else []
        hint = f" (did you mean {guess[0]!r}?)" if guess else ""
        return f"must be one of {', '.join(values)}, got {tag!r}{hint}"
    if kind in ("value_error", "assertion_error"):
        return err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    message = err["msg"]
    if "input" in err and not isinstance(err["input"], dict | list):
        message += f", got {got}"
    return message


def validation_issues(
    e: ValidationError,
    root: type[BaseModel],
    data: Any,
    make: MakeIssue,
    *,
    what: str = "the config",
    aliases: Sequence[str] = (),
) -> list[SpecIssue]:
    """One SpecIssue per distinct (field, message). `what` names the top level in messages;
    `aliases` are extra top-level names offered as did-you-mean (legacy spellings)."""
    out: list[SpecIssue] = []
    seen: set[tuple[str, str]] = set()
    for err in e.errors(include_url=False):
        walk = _Walk(root, data, tuple(err["loc"]))
        path = tuple(walk.path)
        kind = err["type"]
        if kind == "union_tag_invalid":
            path += (str(err.get("ctx", {}).get("discriminator", "")).strip("'"),)  # point at the bad tag
        message = _message(err, walk, what, aliases)
        dotted = ".".join(str(p) for p in path)
        if (dotted, message) in seen:
            continue
        seen.add((dotted, message))
        at = path[:-1] if kind == "missing" else path
        out.append(make(path, at, message, kind == "extra_forbidden"))
    return out

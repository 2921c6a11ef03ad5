"""Load a run YAML into a `RunSpec`, with errors that point at file:line:column.

Steps: parse with positions (`yamlpos`), rewrite legacy mcli spellings
(`compat`), apply command-line overrides, validate with pydantic, and translate
every pydantic error into a `SpecIssue` located in the file, with a did-you-mean
for unknown fields (launcher.spec.issues, shared with the trainers' configs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from launcher.errors import SpecError, SpecIssue
from launcher.spec.compat import LEGACY_TOP_LEVEL, apply_compat
from launcher.spec.issues import validation_issues
from launcher.spec.models import RunSpec
from launcher.spec.yamlpos import Located, load_located, load_value, read_file


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
    max_duration: float | None = None
    preemptible: bool | None = None
    instance: str | None = None
    node_names: list[str] | None = None
    env: list[str] = field(default_factory=list)
    """KEY=VALUE"""
    set: list[str] = field(default_factory=list)
    """dotted.path=YAML-value, e.g. parameters.optimizer.lr=1e-4"""


@dataclass
class LoadedSpec:
    spec: RunSpec
    warnings: list[str]
    file: str | None
    located: Located | None = None
    sources: dict[tuple, str] = field(default_factory=dict)
    """The flag that set each overridden path."""

    def issue(self, dotted: str, message: str) -> SpecIssue:
        """`message` about the field `dotted` (compute.nodes, integrations.0), placed where the
        file (or the flag that set it) has it: for the checks that run after loading."""
        path = tuple(int(p) if p.isdigit() else p for p in dotted.split("."))
        return self.issue_at(path, path, message, False)

    def issue_at(self, path: tuple, at: tuple, message: str, key: bool) -> SpecIssue:
        """`message` about the field at `path`, placed at `at` in the file (the mapping that
        lacks a missing field), at its key with `key`, or at the flag that set it: a
        launcher.spec.issues MakeIssue, for a check of part of the spec against a model."""
        if self.located is None:
            return SpecIssue(message, field=".".join(str(p) for p in path), file=self.file)
        return _issue(path, at, message, key, self.located, self.sources)


OVERRIDE = "command line"


def load_spec(path: str | Path, overrides: Overrides | None = None, *, model: type[RunSpec] = RunSpec) -> LoadedSpec:
    return load_spec_text(read_file(path, "a run spec file"), str(path), overrides, model=model)


def load_spec_text(
    text: str | bytes, file: str | None = None, overrides: Overrides | None = None, *, model: type[RunSpec] = RunSpec
) -> LoadedSpec:
    """`model`: RunSpec or a subclass (the SDK's RunConfig), validated into directly: each
    model class builds its validator on first use (defer_build), so a caller that wants a
    subclass builds one validator, not two."""
    located = load_located(text, file)
    if not isinstance(located.data, dict):
        kind = "a list" if isinstance(located.data, list) else f"a {type(located.data).__name__} ({located.data!r:.40})"
        raise SpecError(
            [
                SpecIssue(
                    f"the top level must be a mapping of fields (name, image, command, ...), got {kind}",
                    file=file,
                    line=1,
                    column=1,
                )
            ]
        )
    warnings: list[str] = []
    issues = apply_compat(located, warnings)
    sources: dict[tuple, str] = {}
    if overrides:
        issues += _apply_overrides(located, overrides, sources)
    issues += [
        _issue(path, path, message, key, located, sources) for path, message, key in _unencodable(located.data, ())
    ]
    if issues:
        raise SpecError(issues)
    try:
        spec = model.model_validate(located.data)
    except ValidationError as e:
        raise SpecError(_issues_from(e, located, sources, model)) from None
    return LoadedSpec(spec=spec, warnings=warnings, file=file, located=located, sources=sources)


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

    for attr, path in (
        ("name", ("name",)),
        ("image", ("image",)),
        ("priority", ("scheduling", "priority")),
        ("max_retries", ("scheduling", "max_retries")),
        ("max_duration", ("scheduling", "max_duration")),
    ):
        value = getattr(o, attr)
        if value is not None:
            put(path, value, f"--{attr.replace('_', '-')} {value}")
    if o.preemptible is not None:
        put(("scheduling", "preemptible"), o.preemptible, "--preemptible" if o.preemptible else "--no-preemptible")
    for attr in ("gpus", "gpu_type", "nodes", "cluster", "instance"):
        value = getattr(o, attr)
        if value is not None:
            put(("compute", attr), value, f"--{attr.replace('_', '-')} {value}")
    if o.node_names is not None:
        put(("compute", "node_names"), list(o.node_names), f"--node-names {','.join(o.node_names)}")
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
            value = load_value(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        except ValueError as e:
            issues.append(SpecIssue(str(e), field=dotted, file=f"--set {item}"))
            continue
        put(tuple(keys), value, f"--set {item}")
    return issues


# ---------------------------------------------------------------- text UTF-8 cannot hold


_SURROGATE = re.compile("[\ud800-\udfff]")


def _unencodable(value: Any, path: tuple) -> list[tuple[tuple, str, bool]]:
    """(path, why, whether the key is at fault) of each string, key or value, that UTF-8
    cannot encode: a lone surrogate (YAML's "\\uD800", or a byte of a flag that was not
    UTF-8). Every backend writes the spec as UTF-8 (state, manifests, the command's exec)."""
    found: list[tuple[tuple, str, bool]] = []
    if isinstance(value, str):
        if m := _SURROGATE.search(value):
            found.append((path, _surrogate_words(m), False))
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and (m := _SURROGATE.search(k)):
                found.append(((*path, k), "its name " + _surrogate_words(m), True))
            found += _unencodable(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _unencodable(v, (*path, i))
    return found


def _surrogate_words(m: re.Match) -> str:
    # PyYAML reads a pair of \\u escapes (a UTF-16 surrogate pair) as two lone surrogates.
    return (
        f"holds {m.group()!r} at character {m.start() + 1}, a lone UTF-16 surrogate that UTF-8 cannot "
        "encode; write the character itself, or \\U0001F600 (8 hex digits) for one past \\uFFFF"
    )


# ---------------------------------------------------------------- errors


def _issue(path: tuple, at: tuple, message: str, key: bool, located: Located, sources: dict[tuple, str]) -> SpecIssue:
    dotted = ".".join(str(p) for p in path)
    # The flag that set this field, or that created it (--set bogus.field=1 makes `bogus`).
    source = next((flag for p, flag in sources.items() if path[: len(p)] == p or p[: len(path)] == path), None)
    if source:
        return SpecIssue(message, field=dotted, file=source)
    line, col = located.where(at, key=key)
    return SpecIssue(message, field=dotted, file=located.file, line=line, column=col)


def _issues_from(
    e: ValidationError, located: Located, sources: dict[tuple, str], model: type[RunSpec] = RunSpec
) -> list[SpecIssue]:
    def make(path: tuple, at: tuple, message: str, key: bool) -> SpecIssue:
        return _issue(path, at, message, key, located, sources)

    issues = validation_issues(e, model, located.data, make, what="the run spec", aliases=list(LEGACY_TOP_LEVEL))
    issues.sort(key=lambda i: (i.line or 0, i.column or 0))
    return issues

"""mcli compatibility: rewrite legacy spellings into the current shape, with a note each.

mcli still accepts `run_name`, the top-level `gpu_num`/`gpu_type`/`cluster`/`cpus`,
and `env_variables` as a list of {key, value}. We accept them too, move them
where they belong (keeping their file positions), and say so.
"""

from __future__ import annotations

from typing import Any

from launcher.errors import SpecIssue
from launcher.spec.models import PLATFORM_ONLY
from launcher.spec.yamlpos import Located

# legacy top-level key -> path in the current schema
LEGACY_TOP_LEVEL: dict[str, tuple[str, ...]] = {
    "run_name": ("name",),
    "gpu_num": ("compute", "gpus"),
    "gpu_type": ("compute", "gpu_type"),
    "cluster": ("compute", "cluster"),
    "cpus": ("compute", "cpus"),
}


def _where(located: Located, path: tuple) -> str:
    line, _ = located.where(path, key=True)
    return f"{located.file}:{line}: " if located.file and line else ""


def _move_positions(located: Located, old: tuple, new: tuple) -> None:
    for table in (located.positions, located.key_positions):
        for p in [p for p in table if p[: len(old)] == old]:
            table[new + p[len(old) :]] = table[p]


def apply_compat(located: Located, warnings: list[str]) -> list[SpecIssue]:
    data: dict[str, Any] = located.data
    issues: list[SpecIssue] = []
    for legacy, target in LEGACY_TOP_LEVEL.items():
        if legacy not in data:
            continue
        dotted = ".".join(target)
        parent: Any = data
        for k in target[:-1]:
            if parent.get(k) is None:
                parent[k] = {}
            parent = parent[k]
            if not isinstance(parent, dict):
                break  # the model reports the wrong type of compute
        if not isinstance(parent, dict):
            continue
        if target[-1] in parent:
            line, col = located.where((legacy,), key=True)
            issues.append(
                SpecIssue(
                    f"set both {legacy!r} and {dotted!r}; keep only {dotted!r}",
                    field=legacy,
                    file=located.file,
                    line=line,
                    column=col,
                )
            )
            continue
        parent[target[-1]] = data.pop(legacy)
        _move_positions(located, (legacy,), target)
        warnings.append(f"{_where(located, target)}{legacy!r} is deprecated; use {dotted!r}")

    ignored: list[tuple[str, ...]] = [(k,) for k in PLATFORM_ONLY if k in data]
    scheduling = data.get("scheduling")
    if isinstance(scheduling, dict):
        ignored += [("scheduling", k) for k in ("resumable", "watchdogEnabled", "watchdog_enabled") if k in scheduling]
    if ignored:
        ignored.sort(key=lambda p: located.where(p, key=True)[0] or 0)  # in file order
        names = ", ".join(".".join(p) for p in ignored)
        warnings.append(
            f"{_where(located, ignored[0])}{names}: only the MosaicML platform acts on "
            f"{'this field' if len(ignored) == 1 else 'these fields'}; accepted and ignored here"
        )

    env = data.get("env_variables")
    if isinstance(env, list):
        converted: dict[str, Any] = {}
        for i, item in enumerate(env):
            if not (isinstance(item, dict) and set(item) == {"key", "value"}):
                line, col = located.where(("env_variables", i))
                issues.append(
                    SpecIssue(
                        "each item of the list form must be {key: NAME, value: VALUE}",
                        field=f"env_variables.{i}",
                        file=located.file,
                        line=line,
                        column=col,
                    )
                )
                continue
            key = item["key"]
            if key in converted:
                line, col = located.where(("env_variables", i))
                issues.append(
                    SpecIssue(
                        f"duplicate key {key!r}", field=f"env_variables.{i}", file=located.file, line=line, column=col
                    )
                )
            converted[key] = item["value"]
            _move_positions(located, ("env_variables", i, "value"), ("env_variables", key))
        data["env_variables"] = converted
        warnings.append(
            f"{_where(located, ('env_variables',))}the list form of env_variables is deprecated; use a mapping NAME: VALUE"
        )
    return issues

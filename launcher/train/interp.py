"""`${a.b.c}` interpolation, as llm-foundry configs use it (OmegaConf's syntax).

A reference names a path from the root of the config (`${variables.global_seed}`).
A string that is exactly one reference takes the referenced value with its type
(an int stays an int, null stays null); a reference inside a longer string is
replaced by its text. References may point at values that hold references.
"""

from __future__ import annotations

import re
from typing import Any

REF = re.compile(r"\$\{([^${}]*)\}")

Path_ = tuple[str | int, ...]


class InterpolationError(ValueError):
    def __init__(self, path: Path_, message: str):
        super().__init__(message)
        self.path = path
        self.message = message


def interpolate(data: Any) -> Any:
    """A copy of `data` with every `${...}` resolved. Raises InterpolationError
    with the path of the value that holds the bad reference."""
    return _Resolver(data).walk(data, ())


class _Resolver:
    def __init__(self, root: Any):
        self.root = root
        self.active: list[str] = []

    def walk(self, node: Any, path: Path_) -> Any:
        if isinstance(node, dict):
            return {k: self.walk(v, (*path, k)) for k, v in node.items()}
        if isinstance(node, list):
            return [self.walk(v, (*path, i)) for i, v in enumerate(node)]
        if isinstance(node, str) and "${" in node:
            return self.string(node, path)
        return node

    def string(self, text: str, path: Path_) -> Any:
        whole = REF.fullmatch(text.strip())
        if whole:
            return self.lookup(whole.group(1), path)

        def repl(m: re.Match[str]) -> str:
            value = self.lookup(m.group(1), path)
            if isinstance(value, dict | list):
                raise InterpolationError(
                    path, f"${{{m.group(1)}}} is a {type(value).__name__}; it cannot be part of a string"
                )
            return "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)

        out = REF.sub(repl, text)
        if "${" in out:
            raise InterpolationError(path, f"unbalanced interpolation in {text!r}")
        return out

    def lookup(self, ref: str, path: Path_) -> Any:
        ref = ref.strip()
        if not ref or ":" in ref:
            raise InterpolationError(
                path, f"unsupported interpolation ${{{ref}}}: only references such as ${{variables.name}} are supported"
            )
        if ref in self.active:
            chain = " -> ".join([*self.active, ref])
            raise InterpolationError(path, f"circular interpolation: {chain}")
        node: Any = self.root
        for part in ref.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise InterpolationError(path, f"${{{ref}}} refers to nothing: there is no {ref!r} in the config")
        self.active.append(ref)
        try:
            return self.walk(node, path)
        finally:
            self.active.pop()

"""launcher.mcli keeps mcli's SDK signature for signature: every function and class of
mosaicml-cli 0.8.3 in scope (tests/mcli/mcli_0_8_3_signatures.json, which
bench/mcli_signatures.py regenerates from mcli itself) has the same parameters in
launcher.mcli, by name, kind and default, in the same order; an Enum the same members; a
TypedDict the same keys. Any drift fails here, naming the parameter."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

import launcher.mcli as mcli

TABLE = json.loads((Path(__file__).parent / "mcli_0_8_3_signatures.json").read_text())


def parameters(obj) -> list[list[str]]:
    """As bench/mcli_signatures.py records them: [name, kind, default]."""
    return [
        [p.name, p.kind.name, "<required>" if p.default is inspect.Parameter.empty else _default(p.default)]
        for p in inspect.signature(obj).parameters.values()
    ]


def _default(value) -> str:
    # A dataclass field's default_factory shows as <factory> in mcli's signatures too.
    return "<factory>" if type(value).__name__ == "_HAS_DEFAULT_FACTORY_CLASS" else repr(value)


def drift(want: list[list[str]], have: list[list[str]]) -> list[str]:
    """Each difference, in words: a parameter missing, extra, or with another kind or default."""
    out = []
    for i in range(max(len(want), len(have))):
        w = want[i] if i < len(want) else None
        h = have[i] if i < len(have) else None
        if w == h:
            continue
        if h is None:
            assert w is not None
            out.append(f"missing parameter {w[0]!r} ({w[1]}, default {w[2]})")
        elif w is None:
            out.append(f"extra parameter {h[0]!r}")
        else:
            out.append(f"parameter {i}: mcli has {w}, launcher.mcli has {h}")
    return out


def test_the_table_is_mcli_0_8_3():
    assert TABLE["version"] == "0.8.3"
    assert len(TABLE["functions"]) >= 30 and len(TABLE["classes"]) >= 30


@pytest.mark.parametrize("name", sorted(TABLE["functions"]))
def test_function_signature(name):
    assert name in mcli.__all__, f"launcher.mcli has no {name}"
    assert drift(TABLE["functions"][name], parameters(getattr(mcli, name))) == []


@pytest.mark.parametrize("name", sorted(TABLE["classes"]))
def test_class_signature(name):
    import enum

    assert name in mcli.__all__, f"launcher.mcli has no {name}"
    want, cls = TABLE["classes"][name], getattr(mcli, name)
    if "members" in want:
        assert issubclass(cls, enum.Enum)
        assert {m.name: m.value for m in cls} == want["members"]
    if "keys" in want:
        assert sorted(cls.__annotations__) == want["keys"] and cls.__total__ == want["total"]
    if want.get("init") is not None:
        assert drift(want["init"], parameters(cls)) == []
    elif "init" in want:  # an exception that takes whatever Exception takes
        assert issubclass(cls, BaseException) and "__init__" not in cls.__dict__
    for method, params in (want.get("methods") or {}).items():
        assert drift(params, parameters(getattr(cls, method))) == [], f"{name}.{method}"
    for prop in want.get("properties") or []:
        assert isinstance(inspect.getattr_static(cls, prop), property), f"{name}.{prop} is not a property"


def test_drift_is_named():
    """The comparison itself: a renamed parameter and a changed default are both reported."""
    want = [["run", "POSITIONAL_OR_KEYWORD", "<required>"], ["timeout", "KEYWORD_ONLY", "10"]]
    assert drift(want, [["run", "POSITIONAL_OR_KEYWORD", "<required>"], ["timeout", "KEYWORD_ONLY", "None"]])
    assert drift(want, [["runs", "POSITIONAL_OR_KEYWORD", "<required>"]])
    assert drift(want, want) == []

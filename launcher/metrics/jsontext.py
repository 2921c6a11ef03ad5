"""The JSON text of metric points, as `launcher metrics -o json` writes them.

Formatting a float exactly (repr) costs about a microsecond, and a point has two: on a
100k-step run that is most of the time of `-o json`. So each point's text is formatted
once, on first use, and kept beside the numbers in the cached index (index.Columns); a
repeated call only joins strings.
"""

from __future__ import annotations

from collections.abc import Sequence

NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
"""How Python's json writes the floats that JSON proper has no literal for."""


def json_floats(values: Sequence[float]) -> list[str]:
    # repr() is what json.dumps writes for a finite float; map() keeps it in C.
    return [NON_FINITE.get(r, r) for r in map(repr, values)]


def point_texts(steps: Sequence[int], values: Sequence[float], times: Sequence[float]) -> list[str]:
    """Per point, the middle of the object json.dumps writes for it:
    '"step": 12, "value": 2.31, "time": 1764000000.123' (time null when unknown).
    Never contains a newline, so a list of them can be stored joined by newlines."""
    texts = [r if r != "NaN" else "null" for r in json_floats(times)]
    # %-formatting: the braces are JSON's, and one % per point is the fast path
    return ['"step": %d, "value": %s, "time": %s' % p for p in zip(steps, json_floats(values), texts, strict=False)]  # noqa: UP031

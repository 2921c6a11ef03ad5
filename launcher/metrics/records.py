"""The metric record format: one line per logged step, recoverable from any log.

The trainer prints, on rank 0 only, one line per step:

    @@launcher.metrics {"step": 12, "time": 1764438000.123, "rank": 0, "metrics": {"loss/train/total": 2.31, ...}}

`step` is the global batch count (Composer's `timestamp.batch`), `time` is Unix
seconds, `metrics` maps metric names to floats. Lines of other shapes with the
same prefix may carry `"event"` (e.g. `{"event": "fit_start", "max_duration": "50ba", ...}`)
and no `metrics`. When the run has an artifact location, the same JSON objects
(without the prefix) are appended to `metrics.jsonl` there.
"""

from __future__ import annotations

import json
from typing import Any

METRIC_PREFIX = "@@launcher.metrics "
METRICS_FILE = "metrics.jsonl"


def format_record(record: dict[str, Any]) -> str:
    return METRIC_PREFIX + json.dumps(record, separators=(",", ":"), allow_nan=True)


def parse_record(line: str) -> dict[str, Any] | None:
    """The record in a log line, or None. Tolerates a prefix before the marker
    (a rank tag, a timestamp) since backends may decorate lines."""
    i = line.find(METRIC_PREFIX)
    if i < 0:
        return None
    try:
        obj = json.loads(line[i + len(METRIC_PREFIX) :])
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None

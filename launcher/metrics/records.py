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
import re
from typing import Any

from launcher.pod.contract import METRIC_PREFIX

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


# --- Readers beyond one line: bulk scanning, ranks, well-known names ---------------------

FIT_START = "fit_start"
"""The event the trainer emits once per attempt, before its first step; it may carry
`max_duration` (Composer's string, e.g. "50ba") and `max_batches` (an int, when known)."""

DEFAULT_METRIC = "loss/train/total"

_RECORD_RE = re.compile(re.escape(METRIC_PREFIX.encode()) + rb"([^\n]*)")


def scan_records(buf: bytes, *, prefixed: bool = True) -> list[Any]:
    """The JSON values of every record line in a block of whole lines, in order (callers
    keep the dicts). Malformed lines are skipped.

    With `prefixed`, lines are log lines and only those holding the marker count (the
    same rule as parse_record, but one C-level regex scan over the block instead of a
    Python loop over lines: logs are mostly noise). Without it, the block is
    metrics.jsonl: one bare JSON object per line.
    """
    if prefixed:
        payloads = _RECORD_RE.findall(buf)
    else:
        payloads = [line for line in buf.splitlines() if line.strip()]
    if not payloads:
        return []
    # One json.loads over the whole block is ~1.7x faster than one per line. A torn or
    # foreign line breaks the array (or changes its length): then parse line by line.
    try:
        values = json.loads(b"[" + b",".join(payloads) + b"]")
        if len(values) == len(payloads):
            return values
    except ValueError:
        pass
    values = []
    for payload in payloads:
        try:
            values.append(json.loads(payload))
        except ValueError:  # UnicodeDecodeError is a ValueError too
            continue
    return values


def record_rank(record: dict[str, Any], default: int = 0) -> int:
    """The global rank that wrote a record: its own "rank" field, else where the line
    came from (the log's rank). Only rank 0's metrics count."""
    rank = record.get("rank", default)
    return rank if isinstance(rank, int) else default

"""Small shared pieces: clocks in the API's formats, the API's error shape, merge patch,
label and field selectors."""

from __future__ import annotations

import copy
import random
import re
import time
from datetime import UTC, datetime
from typing import Any


def now_ns() -> int:
    return time.time_ns()


def rfc3339(ns: int | None = None, *, nano: bool = False) -> str:
    ns = now_ns() if ns is None else ns
    secs, frac = divmod(ns, 1_000_000_000)
    base = datetime.fromtimestamp(secs, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if not nano:
        return base + "Z"
    digits = f"{frac:09d}".rstrip("0")  # Go's RFC3339Nano trims trailing zeros
    return f"{base}.{digits}Z" if digits else base + "Z"


def parse_rfc3339_ns(text: str) -> int:
    """Nanoseconds since the epoch of an RFC3339 (optionally fractional) timestamp."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)", text.strip())
    if not m:
        raise ValueError(f"not an RFC3339 time: {text!r}")
    whole = datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    return int(whole.timestamp()) * 1_000_000_000 + int((m.group(2) or "0").ljust(9, "0"))


def age(timestamp: str | None) -> str:
    """kubectl's short age ("5s", "3m2s", "4h", "2d") of an RFC3339 timestamp."""
    if not timestamp:
        return "<unknown>"
    secs = max(0, int(time.time() - parse_rfc3339_ns(timestamp) / 1e9))
    if secs < 120:
        return f"{secs}s"
    if secs < 600:
        return f"{secs // 60}m{secs % 60}s" if secs % 60 else f"{secs // 60}m"
    if secs < 3 * 3600:
        return f"{secs // 60}m"
    if secs < 48 * 3600:
        return f"{secs // 3600}h"
    return f"{secs // 86400}d"


def rand_suffix(n: int = 5) -> str:
    return "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(n))


REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(code: int, reason: str | None = None, message: str | None = None, details: dict | None = None) -> dict:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message or REASONS.get(code, "error"),
        "reason": reason or REASONS.get(code, ""),
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def body(self) -> dict:
        return status_body(self.code, self.reason, self.message, self.details)


def not_found(resource: str, name: str) -> ApiError:
    group = resource.partition(".")[0]
    return ApiError(404, "NotFound", f'{resource} "{name}" not found', {"name": name, "kind": group})


def invalid(kind: str, name: str, causes: list[tuple[str, str]], group: str = "") -> ApiError:
    """A 422 as the API server words it: `Job.batch "x" is invalid: [field: msg, ...]`."""
    qual = f"{kind}.{group}" if group else kind
    parts = [f"{f}: {m}" for f, m in causes]
    text = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return ApiError(
        422,
        "Invalid",
        f'{qual} "{name}" is invalid: {text}',
        {
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes],
        },
    )


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# --- selectors ---------------------------------------------------------------------------------
_REQ = re.compile(r"\s*(!?)([A-Za-z0-9_./-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9_.-]*)|(?<=\s)(in|notin)\s*\(([^)]*)\))?\s*")


def parse_label_selector(text: str | None) -> list[tuple]:
    reqs: list[tuple] = []
    pos = 0
    text = text or ""
    while pos < len(text):
        m = _REQ.match(text, pos)
        if not m or m.end() == pos:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {text[pos:]!r}")
        neg, key, op, val, setop, setvals = m.groups()
        if op:
            reqs.append(("ne" if op == "!=" else "eq", key, val))
        elif setop:
            reqs.append((setop, key, {v.strip() for v in setvals.split(",")}))
        else:
            reqs.append(("absent" if neg else "exists", key, None))
        pos = m.end()
        if pos < len(text) and text[pos] == ",":
            pos += 1
    return reqs


def labels_match(labels: dict[str, str], reqs: list[tuple]) -> bool:
    for op, key, val in reqs:
        have = labels.get(key)
        if op == "eq" and have != val:
            return False
        if op == "ne" and have == val:
            return False
        if op == "in" and have not in val:
            return False
        if op == "notin" and have in val:
            return False
        if op == "exists" and key not in labels:
            return False
        if op == "absent" and key in labels:
            return False
    return True


def fields_match(obj: dict, selector: str | None) -> bool:
    for part in filter(None, (selector or "").split(",")):
        neg = "!=" in part
        path, _, want = part.partition("!=" if neg else "=")
        want = want.lstrip("=")
        value: Any = obj
        for seg in path.split("."):
            value = value.get(seg) if isinstance(value, dict) else None
        value = "" if value is None else str(value)
        if (value == want) == neg:
            return False
    return True


def expr_match(labels: dict[str, str], e: dict) -> bool:
    """One matchExpressions entry (node or label selector requirement)."""
    op, have = e["operator"], labels.get(e["key"])
    if op == "In":
        return have in e.get("values", [])
    if op == "NotIn":
        return have not in e.get("values", [])
    if op == "Exists":
        return e["key"] in labels
    if op == "DoesNotExist":
        return e["key"] not in labels
    return False


def selector_matches(labels: dict[str, str], selector: dict) -> bool:
    """A metav1.LabelSelector (matchLabels and matchExpressions)."""
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items()) and all(
        expr_match(labels, e) for e in selector.get("matchExpressions") or []
    )

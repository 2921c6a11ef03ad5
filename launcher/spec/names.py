"""Run names: RFC 1123 labels with a unique suffix, short enough for Kubernetes."""

from __future__ import annotations

import re
import secrets
import string

SUFFIX_LEN = 6
# The Job's pods are named <run>-<index>; a 4-digit index must still fit in a
# 63-character DNS label, so the run name keeps 58 characters at most.
MAX_RUN_NAME = 58
MAX_BASE = MAX_RUN_NAME - SUFFIX_LEN - 1
_ALPHABET = string.ascii_lowercase + string.digits


def sanitize(name: str) -> str:
    """Lowercase, other characters to '-', collapsed, trimmed; starts with a letter
    so the name is also a valid Service name (DNS-1035)."""
    s = re.sub(r"[^a-z0-9-]+", "-", name.lower())
    s = re.sub(r"-{2,}", "-", s).strip("-")
    if s and not s[0].isalpha():
        s = "r-" + s
    return s[:MAX_BASE].rstrip("-")


def unique_run_name(name: str) -> str:
    suffix = "".join(secrets.choice(_ALPHABET) for _ in range(SUFFIX_LEN))
    return f"{sanitize(name)}-{suffix}"

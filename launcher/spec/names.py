"""Run names: RFC 1123 labels with a unique suffix, short enough for Kubernetes."""

from __future__ import annotations

import re

# secrets.choice is SystemRandom().choice (os.urandom); the secrets module would also import
# hmac and OpenSSL's hashlib, a few ms of every command that names a run (validate).
from random import SystemRandom

SUFFIX_LEN = 6
# A run's pod names must fit a DNS label (63 characters). JobSet's webhook refuses a JobSet
# whose longest pod name, <run>-node-0-<index>-<5 random characters>, would not; an Indexed
# Job's pods have the hostname <run>-<index>. With a 4-digit index (up to 10,000 nodes) both
# fit when the run name keeps 45 characters at most. Every name is cut to that on every
# backend, so validate, dry-run and run agree and a spec's name means the same run anywhere.
MAX_RUN_NAME = 63 - len("-node-0-") - 4 - len("-abcde")
MAX_BASE = MAX_RUN_NAME - SUFFIX_LEN - 1
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"  # string.ascii_lowercase + string.digits
_RANDOM = SystemRandom()


def sanitize(name: str) -> str:
    """Lowercase, other characters to '-', collapsed, trimmed; starts with a letter
    so the name is also a valid Service name (DNS-1035)."""
    s = re.sub(r"[^a-z0-9-]+", "-", name.lower())
    s = re.sub(r"-{2,}", "-", s).strip("-")
    if s and not s[0].isalpha():
        s = "r-" + s
    return s[:MAX_BASE].rstrip("-")


def unique_run_name(name: str) -> str:
    suffix = "".join(_RANDOM.choice(_ALPHABET) for _ in range(SUFFIX_LEN))
    return f"{sanitize(name)}-{suffix}"

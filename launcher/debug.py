"""What a command read, counted, for `--debug` (or LAUNCHER_DEBUG=1).

Each read of config.yaml, each cluster profile parsed into its backend's settings and
each kubeconfig read is one `debug:` line on stderr with its running count, and the
command ends with the totals:

    debug: profile load #1: fake
    debug: counted: config read 1; profile load 1 (fake 1); kubeconfig read 1 (fake 1)

A command should read each once (bench/bench_get_runs.py prints them). Without
--debug nothing is printed; the counts are kept either way (a few dict updates).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import Counter

LOGGER = "launcher"
log = logging.getLogger(LOGGER)

CONFIG_READ = "config read"
PROFILE_LOAD = "profile load"
KUBECONFIG_READ = "kubeconfig read"
EVENTS = (CONFIG_READ, PROFILE_LOAD, KUBECONFIG_READ)

_counts: Counter[tuple[str, str]] = Counter()
_lock = threading.Lock()


def count(event: str, subject: str) -> None:
    """One more `event` (one of EVENTS) for `subject` (a path, a profile's name)."""
    with _lock:
        _counts[(event, subject)] += 1
        total = sum(n for (e, _), n in _counts.items() if e == event)
    logging = sys.modules.get("logging")
    if logging is not None:  # unimported, no handler can have been set up to see the line
        logging.getLogger(LOGGER).debug("%s #%d: %s", event, total, subject)


def reset() -> None:
    with _lock:
        _counts.clear()


def summary() -> str:
    """The totals of every event since the last reset, each by subject where there are several."""
    with _lock:
        counts = dict(_counts)
    parts = []
    for event in EVENTS:
        by_subject = {s: n for (e, s), n in counts.items() if e == event}
        total = sum(by_subject.values())
        detail = ", ".join(f"{s} {n}" for s, n in sorted(by_subject.items()))
        parts.append(f"{event} {total}" + (f" ({detail})" if event != CONFIG_READ and detail else ""))
    return "counted: " + "; ".join(parts)


class _Stderr(logging.Handler):
    """Writes to whatever sys.stderr is at the time (a test's capture, click's runner)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging must never fail a command
            self.handleError(record)


_handler = _Stderr()
_handler.setFormatter(logging.Formatter("debug: %(message)s"))


def enable() -> None:
    """Show the launcher's DEBUG lines on stderr (once, however often it is called)."""
    if _handler not in log.handlers:
        log.addHandler(_handler)
    log.setLevel(logging.DEBUG)


def disable() -> None:
    """Stop showing them: a command run in-process (a test) leaves the next one quiet."""
    log.removeHandler(_handler)
    log.setLevel(logging.NOTSET)

"""Pod logs: read or follow one pod without losing or repeating a line.

Every request asks for timestamps. When a follow stream ends while the
container still runs (a dropped connection, the API server's one-hour cut, a
kubelet log rotation), we reconnect with since_seconds reaching a little before
the last timestamp seen, and drop what was already yielded: lines older than
that timestamp, and as many lines *at* that timestamp as were already seen.
since_seconds counts on the server's clock, so the skew measured from each
response's Date header is added.
"""

from __future__ import annotations

import http.client
import math
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import urllib3
from kubernetes.watch.watch import iter_resp_lines

from launcher.backends.kubernetes.kubeapi import KubeApi, KubeError, WatchHandle

SLACK_SECONDS = 5
# What reading a log stream raises when its connection drops or is cut: urllib3's errors
# (ProtocolError, ReadTimeoutError), http.client's (IncompleteRead) and the socket's (OSError,
# ssl.SSLError). A reader reconnects after these only; anything else is a bug, raised.
STREAM_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)
_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d) ?")


def parse_line(line: str) -> tuple[int | None, str]:
    """`2024-01-01T00:00:00.123456789Z text` -> (nanoseconds since the epoch, text)."""
    m = _TS.match(line)
    if not m:
        return None, line
    base = datetime.fromisoformat(m.group(1) + (m.group(3) if m.group(3) != "Z" else "+00:00"))
    frac = (m.group(2) or "").ljust(9, "0")
    return int(base.timestamp()) * 1_000_000_000 + int(frac or 0), line[m.end() :]


def ns_to_datetime(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


@dataclass
class Cursor:
    """Where a reader is: the newest timestamp yielded and how many lines carried it."""

    last_ns: int | None = None
    at_last: int = 0

    def advance(self, stamp: int | None) -> None:
        if stamp is None:
            return
        if stamp == self.last_ns:
            self.at_last += 1
        else:
            self.last_ns, self.at_last = stamp, 1

    def replay(self) -> Replay:
        """A filter for the next connection, fixed at where the cursor is now."""
        return Replay(self.last_ns, self.at_last)


@dataclass
class Replay:
    """One connection's filter: it skips what earlier connections already yielded.

    The resume point is fixed when the connection opens. Comparing against the live
    cursor instead would treat new lines that share a timestamp as repeats once the
    cursor has moved on (lost lines after a reconnect)."""

    resume_ns: int | None
    repeats_left: int
    caught_up: bool = False

    def fresh(self, stamp: int | None) -> bool:
        if self.caught_up or stamp is None or self.resume_ns is None:
            return True
        if stamp < self.resume_ns:
            return False
        if stamp == self.resume_ns and self.repeats_left > 0:
            self.repeats_left -= 1
            return False
        # The stream is in order: everything after the first new line is new too.
        self.caught_up = True
        return True


def _server_skew(resp) -> float:
    try:
        server = parsedate_to_datetime(resp.headers.get("Date"))
        return server.timestamp() - time.time()
    except (TypeError, ValueError):
        return 0.0


MAX_REREADS = 5


def read_pod(
    api: KubeApi,
    pod: str,
    *,
    follow: bool,
    tail: int | None = None,
    previous: bool = False,
    is_done: Callable[[], bool] = lambda: True,
    handle: WatchHandle | None = None,
) -> Iterator[tuple[int | None, str]]:
    """(timestamp ns, text) for each line of one pod's container, in order, each once.
    `handle.stop()`, from any thread, ends it at once, even while it waits for a line."""
    cursor = Cursor()
    skew = 0.0
    first = True
    rereads = MAX_REREADS
    handle = handle or WatchHandle()
    while not handle.stopped:
        kwargs: dict = {"timestamps": True, "follow": follow}
        if previous:
            kwargs["previous"] = True
        if first and tail is not None:
            kwargs["tailLines"] = tail
        if cursor.last_ns is not None:
            age = time.time() + skew - cursor.last_ns / 1e9
            kwargs["sinceSeconds"] = max(1, math.ceil(age) + SLACK_SECONDS)
        try:
            resp = api.pod_log(pod, **kwargs)
        except KubeError as e:
            if e.status == 404:
                return  # the pod is gone (stopped, deleted)
            if e.status == 400 and previous:
                # restartPolicy Never: no earlier container instance; the crashed one is the current.
                previous = False
                continue
            if e.status == 400 and follow and not is_done():
                time.sleep(0.5)  # the container is still being created
                continue
            if e.status == 400:
                return
            raise
        handle.attach(resp)  # stopped already: shut at once
        skew = _server_skew(resp)
        replay = cursor.replay()
        dropped = False
        try:
            for line in iter_resp_lines(resp):
                stamp, text = parse_line(line)
                if not replay.fresh(stamp):
                    continue
                cursor.advance(stamp)
                yield stamp, text
                if handle.stopped:
                    return
        except STREAM_ERRORS:  # a dropped stream (or one shut by handle.stop()): reconnect below
            dropped = True
        except Exception:
            if handle.stopped:
                return  # shut by handle.stop(): whatever the read raised, it ends here
            raise
        finally:
            handle.attach(None)
            resp.release_conn()
        first = False
        if not follow:
            # A one-shot read that was cut short resumes from the cursor, a bounded number of times.
            if dropped and rereads > 0:
                rereads -= 1
                continue
            return
        if is_done():
            follow = False  # one last read from the cursor picks up what the cut may have lost

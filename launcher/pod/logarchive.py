"""The log archive's layout: what the rank that writes it (launcher.entrypoint.archive) and
the readers on the host (`launcher logs`, `launcher metrics`, the dashboard) agree on.

A run's archive is a directory of the profile's `log_store` (an fsspec URL), named after
the run; the backend gives it to every rank as LAUNCHER_LOG_ARCHIVE. Each rank of each
attempt appends its masked log there, as it wrote it, in chunks (object stores cannot
append), each a new object:

    <log_store>/<run>/attempt-<N>/rank-<R>/<seq>-<t0>.log

seq counts a rank's chunks from 0 (8 digits, so names sort in order); t0 is when the
chunk's first byte was written, in milliseconds since the epoch. Concatenated in seq
order, the chunks are the rank's log byte for byte, so line k of the archive is line k
of the pod's log: a reader hands over from one to the other by counting lines. A chunk
ends at a line end, except where one line alone exceeds CHUNK_BYTES.
"""

from __future__ import annotations

import re

LOG_ARCHIVE = "LAUNCHER_LOG_ARCHIVE"
"""The URL of the run's directory in the archive (<log_store>/<run>); unset: no archive."""
CHUNK_BYTES = 1 << 20
"""A chunk is written once this much is buffered..."""
CHUNK_SECONDS = 3.0
"""...or once its first byte is this old."""

_CHUNK = re.compile(r"^(\d{8,})-(\d+)\.log$")


def rank_dir(attempt: int, rank: int) -> str:
    return f"attempt-{attempt}/rank-{rank}"


def chunk_name(seq: int, t0_ms: int) -> str:
    return f"{seq:08d}-{t0_ms}.log"


def parse_chunk(name: str) -> tuple[int, int] | None:
    """(seq, t0 in ms) of a chunk's file name; None for anything else."""
    m = _CHUNK.match(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_rank_dir(path: str) -> tuple[int, int] | None:
    """(attempt, rank) of 'attempt-N/rank-R'."""
    m = re.match(r"^attempt-(\d+)/rank-(\d+)$", path)
    return (int(m.group(1)), int(m.group(2))) if m else None


def archive_url(log_store: str, run: str) -> str:
    return f"{log_store.rstrip('/')}/{run}"


POD_STORES = (
    "s3://<bucket>/<prefix>",
    "dbfs:/Volumes/<catalog>/<schema>/<volume>/...",
    "a path (or file://) on a volume every pod mounts",
)
"""What a pod's entrypoint writes the archive to (launcher.entrypoint.archive_stores): the
same in every entrypoint mode, with the standard library alone."""


def pod_store_problem(url: str) -> str | None:
    """Why a pod's entrypoint cannot write an archive at `url` (one line), or None. The host
    checks a profile's log_store with it before a run; the rank says it in its log."""
    use = "; use " + ", ".join(POD_STORES[:2]) + " or " + POD_STORES[2]
    if url.startswith("dbfs:"):
        parts = url[len("dbfs:") :].strip("/").split("/")
        if parts[0] != "Volumes" or len(parts) < 4 or not all(parts[:4]):
            return f"{url}: only Unity Catalog Volumes ({POD_STORES[1]}) are supported for dbfs: paths"
        return None
    if "://" not in url:
        return None
    scheme = url.split("://", 1)[0].lower()
    if scheme == "file":
        return None
    if scheme == "s3":
        return None if url[len("s3://") :].split("/", 1)[0] else f"{url}: an s3:// URL names a bucket ({POD_STORES[0]})"
    return f"{scheme}:// is not supported by the pod's entrypoint{use}"

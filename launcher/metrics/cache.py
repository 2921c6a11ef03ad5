"""An on-disk cache of what was read from runs' logs, so a repeated call parses only new bytes.

Entries live under $LAUNCHER_HOME/cache/metrics/<run>/ (one directory per run, so deleting
a run can drop its entries with `forget_run`). A cache is only ever a shortcut: an entry
that cannot be read, or that was written by another format version, is ignored and
rebuilt, and a cache that cannot be written is skipped silently.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any

FORMAT_VERSION = 2
"""Bumped whenever what is pickled changes shape (2: columns keep their points' JSON text)."""


def default_cache_dir() -> Path:
    from launcher.config import launcher_home

    return launcher_home() / "cache" / "metrics"


def _safe_dirname(run: str) -> str:
    # Run names are RFC 1123 labels already; anything else is hashed rather than trusted.
    if run and all(c.isalnum() or c in "-_." for c in run) and not run.startswith("."):
        return run
    return "_" + hashlib.sha1(run.encode()).hexdigest()[:16]


class IndexCache:
    def __init__(self, root: Path | None = None):
        self.root = root if root is not None else default_cache_dir()

    def _path(self, run: str, key: str) -> Path:
        return self.root / _safe_dirname(run) / (hashlib.sha1(key.encode()).hexdigest()[:24] + ".pkl")

    def load(self, run: str, key: str) -> Any | None:
        try:
            with open(self._path(run, key), "rb") as f:
                version, stored_key, value = pickle.load(f)
        except Exception:  # noqa: BLE001 - missing, torn or foreign: rebuild it
            return None
        return value if version == FORMAT_VERSION and stored_key == key else None

    def save(self, run: str, key: str, value: Any) -> None:
        path = self._path(run, key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Write then rename, so a concurrent reader sees the old entry or the new one.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump((FORMAT_VERSION, key, value), f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)

    def forget_run(self, run: str) -> None:
        shutil.rmtree(self.root / _safe_dirname(run), ignore_errors=True)


def forget_run(run: str) -> None:
    """Drop a run's cached indexes (for `launcher delete`)."""
    IndexCache().forget_run(run)

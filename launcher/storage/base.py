"""What every store offers, and the parts written once on top of the few calls each
scheme implements."""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from launcher.storage.boundary import Service, StorageNotFoundError, boundary

SPOOL_BYTES = 64 << 20  # a remote file opened for reading stays in memory up to this, then on disk


@dataclass(frozen=True)
class Credentials:
    """The secrets a store may use, as environment variables: DATABRICKS_HOST with
    DATABRICKS_TOKEN (or another auth the SDK reads: DATABRICKS_CLIENT_ID/_SECRET,
    DATABRICKS_CONFIG_PROFILE); AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN,
    AWS_PROFILE, S3_ENDPOINT_URL. A run gets them from its secrets."""

    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    other_ways: tuple[str, ...] = ()
    """Ways to give missing credentials besides a run's secret, for the hint (on a
    developer's machine: `launcher secret create databricks ...`)."""


@dataclass(frozen=True)
class Patience:
    """How long a store keeps trying: a dead host must fail in seconds, not in the
    databricks-sdk's default 5 minutes."""

    retry_s: int = 20
    """The window in which a client retries connection errors and throttling (429/503)."""
    http_s: int = 60
    """One request's connect and read timeout."""


PATIENT = Patience()
PREFLIGHT = Patience(retry_s=10, http_s=10)


def join(*parts: str) -> str:
    """Relative store paths joined with '/', without empty parts."""
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


def glob_match(path: str, pattern: str) -> bool:
    """A glob over '/'-separated paths: * ? [..] stay within a name, a ** name spans any
    number of names (as glob.glob with recursive=True)."""

    def match(names: list[str], pats: list[str]) -> bool:
        if not pats:
            return not names
        if pats[0] == "**":
            return any(match(names[i:], pats[1:]) for i in range(len(names) + 1))
        return bool(names) and fnmatch.fnmatchcase(names[0], pats[0]) and match(names[1:], pats[1:])

    return match(path.split("/"), pattern.split("/"))


class Store:
    """A tree of files at `url` on one storage. Paths inside are relative and
    '/'-separated; '' is `url` itself (which may name a file). Every failure leaves as a
    LauncherError from launcher.storage.boundary: StorageNotFoundError, StorageAccessError
    (exit 2) or StorageError (exit 1)."""

    url: str
    service: Service

    # -- what each scheme implements -----------------------------------------------------
    def exists(self, rel: str = "") -> bool:
        """A file or a directory is there."""
        raise NotImplementedError

    def isdir(self, rel: str = "") -> bool:
        raise NotImplementedError

    def size(self, rel: str = "") -> int:
        raise NotImplementedError

    def read(self, rel: str = "") -> bytes:
        """A whole (small) file; StorageNotFoundError when it is not there."""
        raise NotImplementedError

    def open(self, rel: str = "") -> BinaryIO:
        """A file for reading, seekable (Parquet needs it): a remote one is fetched first."""
        raise NotImplementedError

    def files(self, sub: str = "") -> list[str]:
        """Every file under `sub` (recursively), relative to the store, sorted; [] when
        there is none."""
        raise NotImplementedError

    def download(self, rel: str, dest: Path) -> None:
        raise NotImplementedError

    def upload(self, local: Path, rel: str) -> None:
        """Write a local file to `rel`, creating its parents; replaces what is there."""
        raise NotImplementedError

    def delete(self, rel: str) -> None:
        """Remove a file; StorageNotFoundError when it is not there."""
        raise NotImplementedError

    def write(self, rel: str, data: bytes) -> None:
        """Write `data` as the file `rel`, creating its parents; replaces what is there. A
        reader never sees a part of it (a single PUT; locally, written then renamed)."""
        fd, tmp = tempfile.mkstemp(prefix=".store-write.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            self.upload(Path(tmp), rel)
        finally:
            os.unlink(tmp)

    def remove_dir(self, rel: str) -> None:
        """Remove an empty directory (a storage without directories has nothing to do)."""

    def check(self) -> None:
        """Raise StorageNotFoundError when the place the store is in (the Volume, the
        bucket) does not exist, before anything is written there."""

    # -- written once ---------------------------------------------------------------------
    def url_of(self, rel: str = "") -> str:
        rel = rel.strip("/")
        return f"{self.url}/{rel}" if rel else self.url

    def describe(self, rel: str = "") -> str:
        """Where a reader looks for `rel`, for messages (a Volume's Files API URL)."""
        return self.url_of(rel)

    def local_path(self) -> Path | None:
        """The store's root on this machine's filesystem; None for remote storage."""
        return None

    def _call(self, action: str, rel: str = ""):
        """The boundary around one client call about `rel`."""
        return boundary(self.service, action, self.url_of(rel))

    def _spooled(self, copy) -> BinaryIO:
        """A seekable temporary file that `copy(f)` has written."""
        f = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
        try:
            copy(f)
        except BaseException:
            f.close()
            raise
        f.seek(0)
        return f  # type: ignore[return-value]

    def glob(self, pattern: str) -> list[str]:
        """Relative paths of the files that match `pattern` (relative, '/'-separated), sorted."""
        literal = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
        return [f for f in self.files(posixpath.dirname(literal)) if glob_match(f, pattern)]

    def download_tree(self, dest: Path, sub: str = "") -> int:
        """Copy every file (under `sub`) into dest, atomically: a partial copy never looks
        complete. Returns the number of files."""
        files = self.files(sub)
        if not files:
            raise StorageNotFoundError(f"{self.url_of(sub)} is empty or does not exist")
        partial = dest.with_name(dest.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        prefix = sub.strip("/")
        for rel in files:
            target = partial / (rel[len(prefix) :].lstrip("/") if prefix else rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            self.download(rel, target)
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(partial, dest)
        return len(files)

    def upload_tree(self, local: Path, sub: str = "", last: tuple[str, ...] = ()) -> int:
        """Upload every file of `local` to `sub`; the names in `last` go after all others
        (the file that marks the whole as complete)."""
        paths = sorted(p for p in local.rglob("*") if p.is_file())
        paths.sort(key=lambda p: p.name in last)
        for p in paths:
            self.upload(p, join(sub, p.relative_to(local).as_posix()))
        return len(paths)

"""Where a converted split goes, and how it is published so that a failed conversion never
looks complete.

Writers always write into a local staging directory. A destination then
- local: renames the finished staging directory to OUT/<split> (atomic on one filesystem);
- remote (dbfs:/Volumes/..., s3://, gs://): uploads each shard through launcher.storage as
  soon as it is complete, then the sidecar, then index.json last.
Until index.json is published, StreamingDataset and the trainer see no dataset.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from launcher.data.credentials import local_credentials
from launcher.data.format import SIDECAR_NAME
from launcher.errors import InputError, LauncherError
from launcher.storage import Store, as_input_error, is_remote, open_store

INDEX_NAME = "index.json"
UPLOAD_THREADS = 4


def check_out(out: str) -> str:
    """Validate --out the way a run spec's data.remote is validated."""
    from launcher.spec.models import check_remote

    try:
        out = check_remote(out)
    except ValueError as e:
        raise InputError(f"--out: {e}") from None
    if out.startswith("dbfs:/") and not out.startswith("dbfs:/Volumes/"):
        raise InputError(
            "--out: convert writes to Unity Catalog Volumes: dbfs:/Volumes/<catalog>/<schema>/<volume>/..."
        )
    return out.rstrip("/") or out


class Destination:
    """Base: a local staging directory, shard uploads as they complete, publish or abort."""

    def __init__(self, out: str, split: str, overwrite: bool):
        self.out = out
        self.split = split
        self.overwrite = overwrite
        self.stage = ""
        self._pool: ThreadPoolExecutor | None = None
        self._futures: list[Future] = []
        self._lock = threading.Lock()
        self.uploaded: list[str] = []

    @property
    def url(self) -> str:
        """The split's location, OUT/<split>."""
        return f"{self.out}/{self.split}"

    @property
    def spec_remote(self) -> str:
        """The value for a run spec's data.remote: OUT, the trainer adds the split."""
        return self.out

    def preflight(self) -> None:
        """Fail fast, before any work: credentials, existence, an existing dataset."""

    def open(self) -> str:
        """Create and return the local staging directory."""
        self.stage = tempfile.mkdtemp(prefix="launcher-convert-")
        return self.stage

    # -- uploads -------------------------------------------------------------------------
    def _upload(self, rel: str) -> None:  # remote destinations override
        raise NotImplementedError

    def shard_done(self, rel: str) -> None:
        """A shard file (relative to the split root) is complete: start its upload."""
        if self._pool is None:
            return
        self.check_uploads()  # an upload that failed stops the conversion at the next shard
        self._futures.append(self._pool.submit(self._upload_and_drop, rel))

    def _upload_and_drop(self, rel: str) -> None:
        self._upload(rel)
        with self._lock:
            self.uploaded.append(rel)
        os.remove(os.path.join(self.stage, rel))  # keep local disk bounded

    def check_uploads(self, wait: bool = False) -> None:
        """Raise the first failed upload's error; with wait, block until all are done."""
        for f in list(self._futures):
            if wait or f.done():
                f.result()  # raises the upload's error
                self._futures.remove(f)

    def publish(self) -> None:
        """Make the split visible: the sidecar, then index.json last."""
        raise NotImplementedError

    def abort(self) -> None:
        """Remove everything this conversion wrote."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self.stage:
            shutil.rmtree(self.stage, ignore_errors=True)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self.stage and os.path.isdir(self.stage):
            shutil.rmtree(self.stage, ignore_errors=True)


class LocalDestination(Destination):
    def __init__(self, out: str, split: str, overwrite: bool):
        super().__init__(os.path.abspath(os.path.expanduser(out)), split, overwrite)

    def preflight(self) -> None:
        final = Path(self.url)
        if final.exists() and not self.overwrite:
            if (final / INDEX_NAME).exists():
                raise InputError(f"{final} already holds a dataset; pass --overwrite to replace it")
            if final.is_file() or any(final.iterdir()):
                raise InputError(f"{final} exists and is not empty; choose another --out or --split")
        if Path(self.out).is_file():
            raise InputError(f"--out {self.out} is a file, not a directory")

    def open(self) -> str:
        # Stage beside the target, so that publishing is a rename on the same filesystem.
        Path(self.out).mkdir(parents=True, exist_ok=True)
        self.stage = tempfile.mkdtemp(prefix=f".{self.split}.partial-", dir=self.out)
        return self.stage

    def publish(self) -> None:
        final = Path(self.url)
        trash = None
        if final.exists():
            trash = final.with_name(f".{self.split}.old-{uuid.uuid4().hex[:8]}")
            final.rename(trash)
        os.rename(self.stage, final)
        self.stage = ""
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)


class _RemoteDestination(Destination):
    def open(self) -> str:
        stage = super().open()
        self._pool = ThreadPoolExecutor(max_workers=UPLOAD_THREADS, thread_name_prefix="upload")
        return stage

    def publish(self) -> None:
        self.check_uploads(wait=True)
        # Partition index.json files are only read by the merge; the root index is the dataset.
        for name in (SIDECAR_NAME, INDEX_NAME):
            self.uploaded.append(name)  # before: an abort removes even a half-failed upload
            self._upload(name)


class StoreDestination(_RemoteDestination):
    """dbfs:/Volumes/... (the Files API), s3://, gs://... through launcher.storage."""

    def __init__(self, out: str, split: str, overwrite: bool):
        super().__init__(out, split, overwrite)
        self.store: Store | None = None
        self._replacing = False

    def preflight(self) -> None:
        try:
            store = open_store(self.out, local_credentials(self.out), what=f"--out {self.out}")
            store.check()
            exists = store.exists(f"{self.split}/{INDEX_NAME}")
        except LauncherError as e:  # before any work, every refusal is the user's to fix
            raise as_input_error(e) from None
        if exists and not self.overwrite:
            raise InputError(f"{self.url} already holds a dataset; pass --overwrite to replace it")
        self.store = store
        self._replacing = exists

    def open(self) -> str:
        if self._replacing:
            # Unpublish first: while the old split is replaced, nothing looks complete.
            for name in (INDEX_NAME, SIDECAR_NAME):
                self._delete_quietly(name)
        return super().open()

    def _upload(self, rel: str) -> None:
        assert self.store is not None
        self.store.upload(Path(self.stage, rel), f"{self.split}/{rel}")

    def _delete_quietly(self, rel: str) -> None:
        assert self.store is not None
        with contextlib.suppress(LauncherError):  # best effort: an abort must not hide the first error
            self.store.delete(f"{self.split}/{rel}")

    def abort(self) -> None:
        super().abort()
        if self.store is None:
            return
        for rel in self.uploaded:
            self._delete_quietly(rel)
        # Empty partition directories are harmless; remove them where the storage has them.
        for sub in sorted({os.path.dirname(r) for r in self.uploaded if os.path.dirname(r)}, reverse=True):
            with contextlib.suppress(LauncherError):
                self.store.remove_dir(f"{self.split}/{sub}")


def destination(out: str, split: str, overwrite: bool = False) -> Destination:
    out = check_out(out)
    if is_remote(out):
        return StoreDestination(out, split, overwrite)
    return LocalDestination(out, split, overwrite)

"""Where a converted split goes, and how it is published so that a failed conversion never
looks complete.

Writers always write into a local staging directory. A destination then
- local: renames the finished staging directory to OUT/<split> (atomic on one filesystem);
- dbfs:/Volumes/...: uploads each shard through databricks-sdk as soon as it is complete,
  then the sidecar, then index.json last;
- s3://, gs://, oci://: the same through streaming's own uploaders.
Until index.json is published, StreamingDataset and the trainer see no dataset.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from launcher.data.format import SIDECAR_NAME
from launcher.data.workspace import RETRY_TIMEOUT_SECONDS, workspace_client
from launcher.errors import InputError, LauncherError

INDEX_NAME = "index.json"
UPLOAD_THREADS = 4


def databricks_error(e: Exception, what: str, *, preflight: bool = False) -> LauncherError:
    """A one-line message for an SDK or connection error; never includes the token. Before
    any work (preflight) every refusal is the user's to fix: exit 2."""
    from databricks.sdk.errors import NotFound, PermissionDenied, Unauthenticated

    host = os.environ.get("DATABRICKS_HOST") or "the workspace"
    if isinstance(e, Unauthenticated):
        return InputError(f"{what}: {host} rejected the token (401); check DATABRICKS_TOKEN")
    if isinstance(e, PermissionDenied):
        return InputError(f"{what}: permission denied on {host} (403): {e}")
    if isinstance(e, NotFound):
        return InputError(f"{what}: not found on {host}: {e}")
    cls = InputError if preflight else LauncherError
    if isinstance(e, TimeoutError):
        cause = e.__cause__ or e.__context__
        why = f": {type(cause).__name__}: {str(cause).splitlines()[0]}" if cause and str(cause) else ""
        return cls(f"{what}: no success from {host} after {RETRY_TIMEOUT_SECONDS} s of retries{why}")
    return cls(f"{what}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'failed'}")


def check_out(out: str) -> str:
    """Validate --out the way a run spec's data.remote is validated."""
    from launcher.spec.models import check_remote

    try:
        out = check_remote(out)
    except ValueError as e:
        raise InputError(f"--out: {e}") from None
    if out.startswith("dbfs:/") and not out.startswith("dbfs:/Volumes/"):
        raise InputError("--out: convert writes to Unity Catalog Volumes: dbfs:/Volumes/<catalog>/<schema>/<volume>/...")
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


class VolumeDestination(_RemoteDestination):
    """dbfs:/Volumes/<catalog>/<schema>/<volume>/... through the Files API."""

    def __init__(self, out: str, split: str, overwrite: bool):
        super().__init__(out, split, overwrite)
        self.path = out[len("dbfs:") :]  # /Volumes/...
        self.volume_root = "/".join(self.path.split("/")[:5])  # /Volumes/c/s/v
        self.client = None
        self._replacing = False

    def _remote(self, rel: str) -> str:
        return f"{self.path}/{self.split}/{rel}"

    def preflight(self) -> None:
        from databricks.sdk.errors import NotFound

        self.client = workspace_client(f"--out {self.out}")
        _, _, catalog, schema, volume = self.volume_root.split("/")
        try:
            self.client.files.get_directory_metadata(self.volume_root)
        except NotFound:
            raise InputError(f"--out: Volume {catalog}.{schema}.{volume} does not exist or is not visible to this token") from None
        except Exception as e:  # noqa: BLE001 - SDK and connection errors get one message
            raise databricks_error(e, f"--out {self.out}", preflight=True) from None
        try:
            self.client.files.get_metadata(self._remote(INDEX_NAME))
            exists = True
        except NotFound:
            exists = False
        except Exception as e:  # noqa: BLE001
            raise databricks_error(e, f"--out {self.out}", preflight=True) from None
        if exists and not self.overwrite:
            raise InputError(f"{self.url} already holds a dataset; pass --overwrite to replace it")
        self._replacing = exists

    def open(self) -> str:
        if self._replacing:
            # Unpublish first: while the old split is replaced, nothing looks complete.
            for name in (INDEX_NAME, SIDECAR_NAME):
                self._delete_quietly(self._remote(name))
        return super().open()

    def _upload(self, rel: str) -> None:
        local = os.path.join(self.stage, rel)
        size = os.path.getsize(local)
        try:
            with open(local, "rb") as f:
                self.client.files.upload(self._remote(rel), f, overwrite=True)
            # The Files API can fail silently on upload; check the size as streaming does.
            got = self.client.files.get_metadata(self._remote(rel)).content_length
        except Exception as e:  # noqa: BLE001
            raise databricks_error(e, f"uploading {self.url}/{rel}") from None
        if got is not None and int(got) != size:
            raise LauncherError(f"uploading {self.url}/{rel}: the Volume holds {got} bytes, expected {size}")

    def _delete_quietly(self, path: str) -> None:
        try:
            self.client.files.delete(path)
        except Exception:  # noqa: BLE001 - best effort: an abort must not hide the first error
            pass

    def abort(self) -> None:
        super().abort()
        if self.client is None:
            return
        for rel in self.uploaded:
            self._delete_quietly(self._remote(rel))
        # Empty partition directories are harmless; remove them when the API allows.
        for sub in sorted({os.path.dirname(r) for r in self.uploaded if os.path.dirname(r)}, reverse=True):
            try:
                self.client.files.delete_directory(self._remote(sub))
            except Exception:  # noqa: BLE001
                pass


class StreamingDestination(_RemoteDestination):
    """s3://, gs://, oci://... through streaming's CloudUploader (its credentials, its retries)."""

    uploader = None

    def preflight(self) -> None:
        try:
            from streaming.base.storage.upload import CloudUploader
        except ImportError:
            raise InputError("writing to object storage needs the train extra: pip install 'launcher[train]'") from None
        self._cloud_uploader = CloudUploader

    def open(self) -> str:
        stage = super().open()
        try:
            # Constructing the uploader checks that the bucket exists.
            self.uploader = self._cloud_uploader.get((stage, self.url), keep_local=True, exist_ok=True)
        except ImportError as e:
            raise InputError(f"--out {self.out}: {e}") from None
        except Exception as e:  # noqa: BLE001 - boto/gcs/oci errors: name the place
            raise InputError(f"--out {self.out}: {type(e).__name__}: {e}") from None
        return stage

    def _upload(self, rel: str) -> None:
        try:
            self.uploader.upload_file(rel)
        except Exception as e:  # noqa: BLE001
            raise LauncherError(f"uploading {self.url}/{rel}: {type(e).__name__}: {e}") from None


def destination(out: str, split: str, overwrite: bool = False) -> Destination:
    out = check_out(out)
    if out.startswith("dbfs:/Volumes/"):
        return VolumeDestination(out, split, overwrite)
    if "://" in out:
        return StreamingDestination(out, split, overwrite)
    return LocalDestination(out, split, overwrite)


"""One storage layer: a file tree named by a URL, on whatever storage the URL names.

    store = open_store("dbfs:/Volumes/main/default/data/corpus", Credentials(env))
    store.read("train/index.json"); store.files("train"); store.upload(path, "train/x.mds")

Schemes:
- dbfs:/Volumes/<catalog>/<schema>/<volume>/...: databricks-sdk's Files API (as streaming
  reads and writes it); DATABRICKS_HOST and DATABRICKS_TOKEN from the credentials.
- s3://bucket/prefix: boto3, S3_ENDPOINT_URL and the AWS_* variables from the credentials.
- gs://, oci://: mosaicml-streaming's own clients, with the credentials the trainer's
  StreamingDataset uses.
- a local path or file://...: this machine's filesystem.
- any other fsspec URL (memory://, https://, ...): fsspec, with its backend installed.

Every failure is a LauncherError in one set of words, made at one boundary
(launcher.storage.boundary): StorageNotFoundError and StorageAccessError (exit 2),
StorageError (exit 1). Callers never see a databricks-sdk, botocore or fsspec exception.

Each store imports its client library (databricks-sdk, boto3, fsspec, streaming) when it is
first used, so importing this package loads none of them.
"""

from __future__ import annotations

from launcher.storage.base import PATIENT, PREFLIGHT, Credentials, Patience, Store, join
from launcher.storage.boundary import (
    StorageAccessError,
    StorageError,
    StorageNotFoundError,
    as_input_error,
)
from launcher.storage.databricks import VolumeStore
from launcher.storage.fsspec_store import FsspecStore
from launcher.storage.local import LocalStore
from launcher.storage.s3 import S3Store
from launcher.storage.streaming_store import SCHEMES, StreamingStore

__all__ = [
    "PATIENT",
    "PREFLIGHT",
    "Credentials",
    "Patience",
    "StorageAccessError",
    "StorageError",
    "StorageNotFoundError",
    "Store",
    "as_input_error",
    "is_remote",
    "join",
    "open_store",
    "scheme_of",
]


def scheme_of(url: str) -> str:
    """'dbfs', 's3', 'gs', ..., 'file' for file:// URLs, 'local' for a path."""
    if url.startswith("dbfs:/"):
        return "dbfs"
    if "://" in url:
        return url.split("://", 1)[0].lower()
    return "local"


def is_remote(url: str | None) -> bool:
    """Not on this machine's filesystem (a path or a file:// URL)."""
    return bool(url) and scheme_of(url) not in ("local", "file")  # type: ignore[arg-type]


def open_store(
    url: str,
    credentials: Credentials | None = None,
    *,
    patience: Patience = PATIENT,
    what: str | None = None,
) -> Store:
    """The store rooted at `url` (a directory, or a file: then '' names it).

    credentials: the environment a store takes its secrets from (default: this process's);
    patience: how long its client retries (PREFLIGHT for checks that must fail in seconds);
    what: how messages about missing or unusable credentials name it (default: the URL,
    e.g. '--out dbfs:/...').

    Raises StorageAccessError (missing credentials), InputError (an unsupported URL, a
    client that is not installed); building a store makes no request.
    """
    credentials = Credentials() if credentials is None else credentials
    what = what or url
    scheme = scheme_of(url)
    if scheme == "local":
        return LocalStore(url)
    if scheme == "file":
        return LocalStore(url[len("file://") :])
    if scheme == "dbfs":
        return VolumeStore(url, credentials, patience, what)
    if scheme == "s3":
        return S3Store(url, credentials, patience, what)
    if scheme in SCHEMES:
        return StreamingStore(url, patience, what)
    return FsspecStore(url)

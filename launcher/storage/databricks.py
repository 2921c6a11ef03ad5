"""dbfs:/Volumes/<catalog>/<schema>/<volume>/... through databricks-sdk's Files API, as
streaming reads and writes it, and the one builder of its WorkspaceClient.

Credentials come from the environment given (a run's databricks secret): DATABRICKS_HOST
with DATABRICKS_TOKEN, or with another auth the SDK reads from the environment
(DATABRICKS_CLIENT_ID/SECRET, DATABRICKS_CONFIG_PROFILE). The SDK retries connection
errors for 300 s by default; a store's Patience shortens that. 401/403/404 are never
retried, so a bad token fails at once.
"""

from __future__ import annotations

import io
import shutil
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO, TypedDict

from launcher.errors import InputError
from launcher.storage.base import Credentials, Patience, Store
from launcher.storage.boundary import (
    Service,
    StorageAccessError,
    StorageError,
    StorageNotFoundError,
    check_reachable,
    first_line,
)

RUN_SECRET = "add a databricks secret to the run (it provides DATABRICKS_HOST and DATABRICKS_TOKEN)"
VOLUME_FORM = "dbfs:/Volumes/<catalog>/<schema>/<volume>/..."
CONNECT_PROBE_S = 5  # the first TCP connect to the workspace (then the SDK's own timeouts)


def other_auth(env: Mapping[str, str]) -> bool:
    """The environment carries an auth other than a token, which the SDK reads itself."""
    return bool(
        (env.get("DATABRICKS_CLIENT_ID") and env.get("DATABRICKS_CLIENT_SECRET"))
        or env.get("DATABRICKS_CONFIG_PROFILE")
    )


class ConfigKwargs(TypedDict, total=False):
    """The arguments of databricks-sdk's Config the launcher gives (the SDK reads the rest
    from the environment)."""

    host: str
    token: str
    auth_type: str


def config_kwargs(what: str, credentials: Credentials) -> ConfigKwargs:
    """The SDK's Config arguments: host and token, or host alone when the environment
    carries another auth. Raises StorageAccessError naming `what` and the fix."""
    env = credentials.env
    host = env.get("DATABRICKS_HOST", "").strip()
    token = env.get("DATABRICKS_TOKEN", "").strip()
    if host and not token and other_auth(env):
        return {"host": host}
    missing = [n for n, v in (("DATABRICKS_HOST", host), ("DATABRICKS_TOKEN", token)) if not v]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise StorageAccessError(
            f"{what} needs Databricks credentials, but {' and '.join(missing)} {verb} not set",
            hint=", or ".join((RUN_SECRET, *credentials.other_ways)),
        )
    return {"host": host, "token": token, "auth_type": "pat"}


def workspace_client(what: str, credentials: Credentials, patience: Patience) -> Any:
    """A WorkspaceClient with the store's retry window; `what` (e.g. the URL) starts every
    message about missing or unusable credentials."""
    try:
        from databricks.sdk import WorkspaceClient
        from databricks.sdk.config import Config
    except ImportError:
        raise InputError(f"{what} needs databricks-sdk: pip install databricks-sdk") from None
    kwargs = config_kwargs(what, credentials)
    try:
        config = Config(**kwargs, retry_timeout_seconds=patience.retry_s, http_timeout_seconds=patience.http_s)
    except ValueError as e:  # the SDK could not configure auth
        raise StorageAccessError(
            f"{what}: Databricks credentials are not usable: {first_line(e) or type(e).__name__}", hint=RUN_SECRET
        ) from None
    return WorkspaceClient(config=config)


class VolumeStore(Store):
    def __init__(self, url: str, credentials: Credentials, patience: Patience, what: str):
        if not url.startswith("dbfs:/Volumes/") or len(url[len("dbfs:") :].strip("/").split("/")) < 4:
            raise InputError(f"{url}: only Unity Catalog Volumes ({VOLUME_FORM}) are supported for dbfs:/ paths")
        self.url = url.rstrip("/")
        self.root = "/" + self.url[len("dbfs:/") :].strip("/")  # /Volumes/c/s/v/...
        self.volume_root = "/".join(self.root.split("/")[:5])
        self.client = workspace_client(what, credentials, patience)
        host = (self.client.config.host or credentials.env.get("DATABRICKS_HOST", "")).rstrip("/")
        self.host = host
        self.service = Service(
            name=f"Databricks at {host}",
            address=f"DATABRICKS_HOST {host}",
            retry_s=patience.retry_s,
            rejected_hint="check DATABRICKS_TOKEN, or the databricks secret it comes from",
            denied_hint="the token's user needs READ VOLUME on the Volume (WRITE VOLUME to write to it)",
            reach_hint="check DATABRICKS_HOST, and that this machine can reach it",
        )
        self.probe_s = min(patience.http_s, CONNECT_PROBE_S)

    def _call(self, action: str, rel: str = ""):
        check_reachable(self.host, self.service, action, self.url_of(rel), timeout=self.probe_s)
        return super()._call(action, rel)

    def _path(self, rel: str) -> str:
        rel = rel.strip("/")
        return f"{self.root}/{rel}" if rel else self.root

    def describe(self, rel: str = "") -> str:
        return f"{self.host}/api/2.0/fs/files{urllib.parse.quote(self._path(rel))}"

    def _missing(self, fn: Any, path: str) -> bool:
        from databricks.sdk.errors import NotFound

        try:
            fn(path)
        except NotFound:
            return True
        return False

    def exists(self, rel: str = "") -> bool:
        with self._call("checking", rel):
            path = self._path(rel)
            return not self._missing(self.client.files.get_metadata, path) or not self._missing(
                self.client.files.get_directory_metadata, path
            )

    def isdir(self, rel: str = "") -> bool:
        with self._call("checking", rel):
            return not self._missing(self.client.files.get_directory_metadata, self._path(rel))

    def size(self, rel: str = "") -> int:
        with self._call("reading", rel):
            return int(self.client.files.get_metadata(self._path(rel)).content_length or 0)

    def read(self, rel: str = "") -> bytes:
        with self._call("reading", rel), self.client.files.download(self._path(rel)).contents as f:
            return f.read()

    def open(self, rel: str = "") -> BinaryIO:
        with self._call("reading", rel):

            def copy(dest: BinaryIO) -> None:
                with self.client.files.download(self._path(rel)).contents as src:
                    shutil.copyfileobj(src, dest, 1 << 20)

            return self._spooled(copy)

    def files(self, sub: str = "") -> list[str]:
        from databricks.sdk.errors import NotFound

        out: list[str] = []
        pending = [self._path(sub)]
        while pending:
            path = pending.pop()
            with self._call("listing", path[len(self.root) + 1 :]):
                try:
                    entries = list(self.client.files.list_directory_contents(path + "/"))
                except NotFound:
                    continue
            for entry in entries:
                if entry.is_directory:
                    pending.append(entry.path.rstrip("/"))
                else:
                    out.append(entry.path[len(self.root) + 1 :])
        return sorted(out)

    def download(self, rel: str, dest: Path) -> None:
        with self._call("downloading", rel):
            with self.client.files.download(self._path(rel)).contents as src, open(dest, "wb") as f:
                shutil.copyfileobj(src, f, 1 << 20)

    def upload(self, local: Path, rel: str) -> None:
        size = local.stat().st_size
        with self._call("uploading", rel):
            with open(local, "rb") as f:
                self.client.files.upload(self._path(rel), f, overwrite=True)
            # The Files API can fail silently on upload; check the size as streaming does.
            got = self.client.files.get_metadata(self._path(rel)).content_length
        if got is not None and int(got) != size:
            raise StorageError(
                f"{self.service.name} holds {got} bytes after uploading {self.url_of(rel)}, expected {size}"
            )

    def write(self, rel: str, data: bytes) -> None:
        with self._call("uploading", rel):
            self.client.files.upload(self._path(rel), io.BytesIO(data), overwrite=True)
            got = self.client.files.get_metadata(self._path(rel)).content_length
        if got is not None and int(got) != len(data):
            raise StorageError(
                f"{self.service.name} holds {got} bytes after uploading {self.url_of(rel)}, expected {len(data)}"
            )

    def delete(self, rel: str) -> None:
        with self._call("deleting", rel):
            self.client.files.delete(self._path(rel))

    def remove_dir(self, rel: str) -> None:
        with self._call("deleting", rel):
            self.client.files.delete_directory(self._path(rel))

    def check(self) -> None:
        _, _, catalog, schema, volume = self.volume_root.split("/")
        with self._call("checking", ""):
            if self._missing(self.client.files.get_directory_metadata, self.volume_root):
                raise StorageNotFoundError(
                    f"Volume {catalog}.{schema}.{volume} does not exist on {self.service.name}, or is not visible to this token"
                )

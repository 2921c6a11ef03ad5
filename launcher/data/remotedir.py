"""Whole directories on dbfs:/Volumes/... (the Files API) or s3:// (boto3): list, download,
upload, delete. Used for Hugging Face datasets saved with save_to_disk, and for the HF
recipe's checkpoints. Paths inside are relative, with '/' separators."""

from __future__ import annotations

import os
import shutil
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from launcher.errors import InputError, LauncherError


def is_remote(uri: str) -> bool:
    return uri.startswith("dbfs:/") or "://" in uri


class RemoteDir:
    uri: str

    def list(self, sub: str = "") -> list[str]:
        """Every file under the directory (or under `sub` of it), relative to the directory."""
        raise NotImplementedError

    def download(self, rel: str, dest: Path) -> None:
        raise NotImplementedError

    def upload(self, local: Path, rel: str) -> None:
        raise NotImplementedError

    def delete(self, rel: str) -> None:
        raise NotImplementedError

    def download_tree(self, dest: Path, sub: str = "") -> int:
        """Copy every file (under `sub`) into dest, atomically: a partial copy never looks
        complete. Returns the number of files."""
        files = self.list(sub)
        if not files:
            raise InputError(f"{self.uri}/{sub}".rstrip("/") + " is empty or does not exist")
        partial = dest.with_name(dest.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        for rel in files:
            target = partial / rel[len(sub) :].lstrip("/") if sub else partial / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            self.download(rel, target)
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(partial, dest)
        return len(files)

    def upload_tree(self, local: Path, sub: str = "", last: tuple[str, ...] = ()) -> int:
        """Upload every file of `local` to `sub`; the names in `last` go after all others
        (the file that marks the whole as complete)."""
        files = sorted(p for p in local.rglob("*") if p.is_file())
        files.sort(key=lambda p: p.name in last)
        for p in files:
            rel = p.relative_to(local).as_posix()
            self.upload(p, f"{sub}/{rel}" if sub else rel)
        return len(files)


class VolumeDir(RemoteDir):
    def __init__(self, uri: str, env: Mapping[str, str] | None, secret_store: bool):
        from launcher.data.workspace import workspace_client

        if not uri.startswith("dbfs:/Volumes/"):
            raise InputError(f"{uri}: only Unity Catalog Volumes (dbfs:/Volumes/...) are supported for dbfs:/ paths")
        self.uri = uri.rstrip("/")
        self.root = self.uri[len("dbfs:") :]
        self.client = workspace_client(self.uri, env, secret_store=secret_store)

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from launcher.data.remote import databricks_error

        try:
            return fn(*args, **kwargs)
        except LauncherError:
            raise
        except Exception as e:  # noqa: BLE001 - SDK and connection errors get one message
            raise databricks_error(e, what) from None

    def list(self, sub: str = "") -> list[str]:
        from databricks.sdk.errors import NotFound

        out: list[str] = []
        pending = [f"{self.root}/{sub}".rstrip("/")]
        while pending:
            path = pending.pop()
            try:
                entries = list(self.client.files.list_directory_contents(path + "/"))
            except NotFound:
                continue
            except Exception as e:  # noqa: BLE001
                from launcher.data.remote import databricks_error

                raise databricks_error(e, f"listing {self.uri}") from None
            for entry in entries:
                if entry.is_directory:
                    pending.append(entry.path.rstrip("/"))
                else:
                    out.append(entry.path[len(self.root) + 1 :])
        return sorted(out)

    def download(self, rel: str, dest: Path) -> None:
        resp = self._call(f"downloading {self.uri}/{rel}", self.client.files.download, f"{self.root}/{rel}")
        with resp.contents as src, open(dest, "wb") as f:
            shutil.copyfileobj(src, f, 1 << 20)

    def upload(self, local: Path, rel: str) -> None:
        with open(local, "rb") as f:
            self._call(f"uploading {self.uri}/{rel}", self.client.files.upload, f"{self.root}/{rel}", f, overwrite=True)

    def delete(self, rel: str) -> None:
        self._call(f"deleting {self.uri}/{rel}", self.client.files.delete, f"{self.root}/{rel}")


class S3Dir(RemoteDir):
    """s3://bucket/prefix through boto3; S3_ENDPOINT_URL points it at another S3 (as streaming reads it)."""

    def __init__(self, uri: str):
        try:
            import boto3
        except ImportError:
            raise InputError(f"{uri} needs boto3: pip install 'launcher[train]'") from None
        parsed = urllib.parse.urlparse(uri)
        self.uri = uri.rstrip("/")
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        session = boto3.session.Session()
        if session.get_credentials() is None:
            raise InputError(
                f"{uri} needs AWS credentials, but none are configured: add an s3 secret to the run "
                "or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            )
        self.client = session.client("s3", endpoint_url=os.environ.get("S3_ENDPOINT_URL") or None)

    def _key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(*args, **kwargs)
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            raise LauncherError(f"{what}: S3 refused it ({code or e})") from None
        except BotoCoreError as e:
            raise LauncherError(f"{what}: {e}") from None

    def list(self, sub: str = "") -> list[str]:
        base = self._key(sub).rstrip("/") + "/" if (self.prefix or sub) else ""
        out = []
        paginator = self.client.get_paginator("list_objects_v2")
        pages = self._call(f"listing {self.uri}", lambda: list(paginator.paginate(Bucket=self.bucket, Prefix=base)))
        for page in pages:
            for obj in page.get("Contents", []):
                key = obj["Key"]
                out.append(key[len(self.prefix) + 1 :] if self.prefix else key)
        return sorted(out)

    def download(self, rel: str, dest: Path) -> None:
        self._call(f"downloading {self.uri}/{rel}", self.client.download_file, self.bucket, self._key(rel), str(dest))

    def upload(self, local: Path, rel: str) -> None:
        self._call(f"uploading {self.uri}/{rel}", self.client.upload_file, str(local), self.bucket, self._key(rel))

    def delete(self, rel: str) -> None:
        self._call(f"deleting {self.uri}/{rel}", self.client.delete_object, Bucket=self.bucket, Key=self._key(rel))


def remote_dir(uri: str, env: Mapping[str, str] | None = None, *, secret_store: bool = True) -> RemoteDir:
    if uri.startswith("dbfs:/"):
        return VolumeDir(uri, env, secret_store)
    if uri.startswith("s3://"):
        return S3Dir(uri)
    raise InputError(f"{uri}: directories can be read from and written to dbfs:/Volumes/... or s3:// (or a local path)")

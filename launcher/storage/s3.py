"""s3://bucket/prefix through boto3. S3_ENDPOINT_URL points it at another S3 (MinIO, moto),
as streaming reads it."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any, BinaryIO

from launcher.errors import InputError
from launcher.storage.base import Credentials, Patience, Store
from launcher.storage.boundary import Service, StorageAccessError, StorageNotFoundError

RUN_SECRET = (
    "add an s3 secret to the run (AWS_SHARED_CREDENTIALS_FILE) or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
)
_MISSING = {"NoSuchKey", "NotFound", "404"}


def _session(credentials: Credentials) -> Any:
    import boto3

    env = credentials.env
    return boto3.session.Session(
        aws_access_key_id=env.get("AWS_ACCESS_KEY_ID") or None,
        aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
        aws_session_token=env.get("AWS_SESSION_TOKEN") or None,
        region_name=env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or None,
        profile_name=env.get("AWS_PROFILE") or None,
    )


class S3Store(Store):
    def __init__(self, url: str, credentials: Credentials, patience: Patience, what: str):
        try:
            from botocore.config import Config
        except ImportError:
            raise InputError(f"{what} needs boto3: pip install 'launcher[train]'") from None
        parsed = urllib.parse.urlparse(url)
        self.url = url.rstrip("/")
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        session = _session(credentials)
        if session.get_credentials() is None:
            raise StorageAccessError(
                f"{what} needs AWS credentials, but none are configured",
                hint=", or ".join((RUN_SECRET, *credentials.other_ways)),
            )
        self.endpoint = credentials.env.get("S3_ENDPOINT_URL") or None
        self.client = session.client(
            "s3",
            endpoint_url=self.endpoint,
            config=Config(
                connect_timeout=patience.http_s,
                read_timeout=patience.http_s,
                # about one attempt for each 5 s of the retry window
                retries={"mode": "standard", "max_attempts": max(2, patience.retry_s // 5)},
            ),
        )
        self.service = Service(
            name=f"S3 at {self.endpoint}" if self.endpoint else "S3",
            address=f"the S3 endpoint {self.endpoint}" if self.endpoint else "S3",
            retry_s=0,
            rejected_hint="check the run's s3 secret, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            denied_hint="the credentials' user needs s3:GetObject and s3:ListBucket on it (s3:PutObject to write)",
            reach_hint="check S3_ENDPOINT_URL, and that this machine can reach it",
        )

    def _key(self, rel: str) -> str:
        return "/".join(p for p in (self.prefix, rel.strip("/")) if p)

    def _is_missing(self, e: Exception) -> bool:
        from botocore.exceptions import ClientError

        return isinstance(e, ClientError) and str(e.response.get("Error", {}).get("Code", "")) in _MISSING

    def _has_file(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as e:
            if self._is_missing(e):
                return False
            raise
        return True

    def _has_dir(self, key: str) -> bool:
        prefix = key.rstrip("/") + "/" if key else ""
        page = self.client.list_objects_v2(Bucket=self.bucket, Prefix=prefix, MaxKeys=1)
        return bool(page.get("KeyCount") or page.get("Contents"))

    def exists(self, rel: str = "") -> bool:
        with self._call("checking", rel):
            key = self._key(rel)
            return (bool(key) and self._has_file(key)) or self._has_dir(key)

    def isdir(self, rel: str = "") -> bool:
        with self._call("checking", rel):
            return self._has_dir(self._key(rel))

    def size(self, rel: str = "") -> int:
        with self._call("reading", rel):
            return int(self.client.head_object(Bucket=self.bucket, Key=self._key(rel))["ContentLength"])

    def read(self, rel: str = "") -> bytes:
        with self._call("reading", rel):
            return self.client.get_object(Bucket=self.bucket, Key=self._key(rel))["Body"].read()

    def open(self, rel: str = "") -> BinaryIO:
        with self._call("reading", rel):
            return self._spooled(lambda f: self.client.download_fileobj(self.bucket, self._key(rel), f))

    def files(self, sub: str = "") -> list[str]:
        key = self._key(sub)
        base = key.rstrip("/") + "/" if key else ""
        skip = len(self.prefix) + 1 if self.prefix else 0
        with self._call("listing", sub):
            pages = list(self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base))
        return sorted(obj["Key"][skip:] for page in pages for obj in page.get("Contents", []))

    def download(self, rel: str, dest: Path) -> None:
        with self._call("downloading", rel):
            self.client.download_file(self.bucket, self._key(rel), str(dest))

    def upload(self, local: Path, rel: str) -> None:
        with self._call("uploading", rel):
            self.client.upload_file(str(local), self.bucket, self._key(rel))

    def write(self, rel: str, data: bytes) -> None:
        with self._call("uploading", rel):
            self.client.put_object(Bucket=self.bucket, Key=self._key(rel), Body=data)

    def delete(self, rel: str) -> None:
        with self._call("deleting", rel):
            if not self._has_file(self._key(rel)):  # S3 answers a delete of nothing with success
                raise StorageNotFoundError(f"{self.service.name} has no {self.url_of(rel)} to delete")
            self.client.delete_object(Bucket=self.bucket, Key=self._key(rel))

    def check(self) -> None:
        from botocore.exceptions import ClientError

        with self._call("checking", ""):
            try:
                self.client.head_bucket(Bucket=self.bucket)
            except ClientError as e:
                if str(e.response.get("Error", {}).get("Code", "")) in ("404", "NoSuchBucket", "NotFound"):
                    raise StorageNotFoundError(
                        f"bucket {self.bucket} does not exist on {self.service.name}, or is not visible to these credentials"
                    ) from None
                raise

"""S3 on 127.0.0.1: moto's server mode (a real HTTP S3 endpoint), for the s3:// paths that
users run through boto3 and streaming's S3 downloader/uploader.

The `s3` fixture starts one server per test (bounded: a thread, stopped at the end), points
boto3 at it with S3_ENDPOINT_URL (which streaming also reads) and fake credentials, and
creates the bucket `launcher-test`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

BUCKET = "launcher-test"


@dataclass
class S3:
    endpoint: str
    bucket: str
    client: object

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def env(self) -> dict[str, str]:
        return {
            "S3_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3]:
    pytest.importorskip("moto.server", reason="needs moto[server] (the dev extra)")
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE"):
            monkeypatch.delenv(k, raising=False)
        fake = S3(endpoint, BUCKET, None)
        for k, v in fake.env().items():
            monkeypatch.setenv(k, v)
        fake.client = boto3.client("s3", endpoint_url=endpoint)
        fake.client.create_bucket(Bucket=BUCKET)
        yield fake
    finally:
        server.stop()

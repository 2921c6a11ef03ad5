"""The storage boundary's words, by status class, through the real clients: databricks-sdk
against the fake Files API (tests/fakes/databricks_files.py), boto3 against moto's S3."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from launcher.errors import InputError
from launcher.storage import (
    Credentials,
    Patience,
    StorageAccessError,
    StorageError,
    StorageNotFoundError,
    open_store,
)
from tests.conftest import needs

needs("databricks.sdk")

VOL = "dbfs:/Volumes/main/default/data"
QUICK = Patience(retry_s=2, http_s=5)


def volume(fake, token: str | None = None, patience: Patience = QUICK):
    return open_store(f"{VOL}/ds", Credentials(fake.env(token)), patience=patience)


def put(fake, rel: str, data: bytes) -> None:
    import io

    from databricks.sdk import WorkspaceClient

    WorkspaceClient(host=fake.host, token=fake.token).files.upload(
        f"/Volumes/main/default/data/ds/{rel}", io.BytesIO(data)
    )


def test_401_is_a_rejected_token_exit_2_without_the_token(databricks_files) -> None:
    store = volume(databricks_files, token="dapi-wrong-0000")
    with pytest.raises(StorageAccessError) as info:
        store.read("index.json")
    e = info.value
    assert e.exit_code == 2
    assert e.message == (
        f"Databricks at {databricks_files.host} rejected the token (401 Unauthenticated) "
        f"while reading {VOL}/ds/index.json"
    )
    assert e.hint == "check DATABRICKS_TOKEN, or the databricks secret it comes from"
    assert "dapi-wrong" not in e.message + e.hint


def test_403_is_denied_access_with_the_servers_reason(databricks_files, tmp_path: Path) -> None:
    databricks_files.fail(
        "PUT",
        "/Volumes/main/default/data/ds/*",
        status=403,
        code="PERMISSION_DENIED",
        message="User does not have WRITE VOLUME on Volume 'main.default.data'.",
    )
    (tmp_path / "f").write_bytes(b"x")
    with pytest.raises(StorageAccessError) as info:
        volume(databricks_files).upload(tmp_path / "f", "train/f")
    assert info.value.exit_code == 2
    assert info.value.message == (
        f"Databricks at {databricks_files.host} denied access (403 Permission denied) while uploading "
        f"{VOL}/ds/train/f: User does not have WRITE VOLUME on Volume 'main.default.data'."
    )
    assert "READ VOLUME" in info.value.hint


def test_404_is_not_found_and_a_missing_volume_is_named(databricks_files) -> None:
    store = volume(databricks_files)
    assert not store.exists("index.json") and store.files() == []
    with pytest.raises(StorageNotFoundError) as info:
        store.read("index.json")
    assert info.value.exit_code == 2
    assert info.value.message.startswith(
        f"Databricks at {databricks_files.host} answered 404 Not found while reading {VOL}/ds/index.json: "
    )
    with pytest.raises(StorageNotFoundError) as info:
        open_store("dbfs:/Volumes/main/default/nope/x", Credentials(databricks_files.env())).check()
    assert info.value.message == (
        f"Volume main.default.nope does not exist on Databricks at {databricks_files.host}, "
        "or is not visible to this token"
    )


def test_5xx_after_the_retry_window_is_a_failure_exit_1(databricks_files) -> None:
    put(databricks_files, "index.json", b"{}")
    databricks_files.fail("GET", "*/index.json", status=503, code="TEMPORARILY_UNAVAILABLE", message="try later")
    started = time.monotonic()
    with pytest.raises(StorageError) as info:
        volume(databricks_files).read("index.json")
    assert time.monotonic() - started < 15  # the store's 2 s window, not the SDK's 300 s
    assert info.value.exit_code == 1 and not isinstance(info.value, InputError)
    assert info.value.message == (
        f"Databricks at {databricks_files.host} failed (TEMPORARILY_UNAVAILABLE) while reading "
        f"{VOL}/ds/index.json: try later (still failing after 2 s of retries)"
    )
    assert sum(1 for m, p in databricks_files.requests if m == "GET" and p.endswith("/index.json")) >= 2  # it retried


def test_a_500_is_not_retried_and_keeps_the_servers_text(databricks_files) -> None:
    databricks_files.fail("GET", "*/index.json", status=500, code="INTERNAL_ERROR", message="disk on fire")
    with pytest.raises(StorageError) as info:
        volume(databricks_files).read("index.json")
    assert info.value.exit_code == 1
    assert info.value.message == (
        f"Databricks at {databricks_files.host} failed (INTERNAL_ERROR) while reading {VOL}/ds/index.json: disk on fire"
    )


def test_connection_refused_fails_at_once(monkeypatch) -> None:
    """databricks-sdk retries a refused connection for its whole window (20 s by default);
    one TCP connect before the first call fails at once instead."""
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    host = f"http://127.0.0.1:{port}"
    store = open_store(f"{VOL}/ds", Credentials({"DATABRICKS_HOST": host, "DATABRICKS_TOKEN": "dapi-x"}))
    started = time.monotonic()
    with pytest.raises(StorageError) as info:
        store.read("index.json")
    assert time.monotonic() - started < 5
    assert info.value.exit_code == 1
    assert (
        info.value.message
        == f"cannot reach DATABRICKS_HOST {host} while reading {VOL}/ds/index.json: connection refused"
    )
    assert info.value.hint == "check DATABRICKS_HOST, and that this machine can reach it"


def test_missing_credentials_name_the_store_and_every_way_to_add_them(databricks_files) -> None:
    with pytest.raises(StorageAccessError) as info:
        open_store(
            f"{VOL}/ds",
            Credentials({"DATABRICKS_HOST": databricks_files.host}, other_ways=("or this",)),
            what="--out x",
        )
    assert info.value.message == "--out x needs Databricks credentials, but DATABRICKS_TOKEN is not set"
    assert info.value.hint == (
        "add a databricks secret to the run (it provides DATABRICKS_HOST and DATABRICKS_TOKEN), or or this"
    )
    assert databricks_files.requests == []
    with pytest.raises(
        InputError, match=r"only Unity Catalog Volumes \(dbfs:/Volumes/<catalog>/<schema>/<volume>/...\)"
    ):
        open_store("dbfs:/tmp/x", Credentials(databricks_files.env()))


def test_s3_missing_key_and_bucket(s3) -> None:
    store = open_store("s3://launcher-test/ds")
    with pytest.raises(StorageNotFoundError) as info:
        store.read("index.json")
    assert info.value.message.startswith(
        f"S3 at {s3.endpoint} answered NoSuchKey while reading s3://launcher-test/ds/index.json"
    )
    with pytest.raises(StorageNotFoundError) as info:
        open_store("s3://no-such-bucket/x").check()
    assert info.value.message == (
        f"bucket no-such-bucket does not exist on S3 at {s3.endpoint}, or is not visible to these credentials"
    )


def test_s3_without_credentials(monkeypatch, tmp_path: Path) -> None:
    pytest.importorskip("boto3")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(StorageAccessError) as info:
        open_store("s3://b/x")
    assert info.value.message == "s3://b/x needs AWS credentials, but none are configured"
    assert "add an s3 secret to the run" in info.value.hint


def test_local_and_fsspec_missing_files(tmp_path: Path) -> None:
    with pytest.raises(StorageNotFoundError) as info:
        open_store(str(tmp_path)).read("nope")
    assert info.value.message == f"the local filesystem has no such file or directory while reading {tmp_path}/nope"
    with pytest.raises(StorageNotFoundError) as info:
        open_store(f"memory:///{id(tmp_path)}").read("nope")
    assert (
        info.value.message
        == f"memory:// storage has no such file or directory while reading memory:///{id(tmp_path)}/nope"
    )
    with pytest.raises(InputError, match="cannot open it"):
        open_store("nosuchscheme://x/y")


def test_gs_without_credentials_says_what_streaming_needs(monkeypatch, tmp_path: Path) -> None:
    pytest.importorskip("streaming")
    pytest.importorskip("google.cloud.storage")
    for k in ("GOOGLE_APPLICATION_CREDENTIALS", "GCS_KEY", "GCS_SECRET"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("NO_GCE_CHECK", "True")  # google.auth: not on a GCE machine, ask no metadata server
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # no gcloud user credentials either
    with pytest.raises(StorageAccessError) as info:
        open_store("gs://some-bucket/x", what="--out gs://some-bucket/x").check()
    assert info.value.exit_code == 2
    assert info.value.message.startswith(
        "--out gs://some-bucket/x: Either set the environment variables `GCS_KEY` and `GCS_SECRET`"
    )

"""The pod's own stores for the log archive (launcher.entrypoint.archive_stores), which need
the standard library alone: AWS Signature Version 4 against AWS's published test vector and
botocore's signer, S3 on moto, a Volume on the fake Databricks Files API, and the one-line
errors (status and the service's text, no secret) a rank's log shows."""

from __future__ import annotations

import datetime
import hashlib
from pathlib import Path

import pytest

from launcher.entrypoint.archive_stores import (
    ArchiveStoreError,
    DirectoryStore,
    S3Store,
    VolumeStore,
    canonical_query,
    open_pod_store,
    sigv4_headers,
)

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
NO_FILES = {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials", "AWS_CONFIG_FILE": "/nonexistent/config"}


def test_sigv4_signs_aws_get_vanilla_test_vector():
    """aws-sig-v4-test-suite/get-vanilla: GET / on example.amazonaws.com, service 'service'."""
    headers = sigv4_headers(
        "GET",
        "https://example.amazonaws.com/",
        {},
        EMPTY_SHA256,
        access_key="AKIDEXAMPLE",
        secret_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        region="us-east-1",
        service="service",
        now=datetime.datetime(2015, 8, 30, 12, 36, tzinfo=datetime.UTC),
    )
    assert headers == {
        "Host": "example.amazonaws.com",
        "X-Amz-Date": "20150830T123600Z",
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        "SignedHeaders=host;x-amz-date, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    }


@pytest.mark.parametrize(
    "method, path, query, body, token",
    [
        ("PUT", "/bucket/logs/r%C3%BCn%20x/attempt-1/rank-0/00000000-1.log", {}, b"line\n", "session-token"),
        (
            "GET",
            "/bucket/",
            {"list-type": "2", "prefix": "logs/rün x/a+b=c/", "delimiter": "/", "continuation-token": "1/+=="},
            b"",
            None,
        ),
    ],
    ids=["put-object", "list-objects-v2"],
)
def test_sigv4_signs_s3_requests_as_botocore_does(method, path, query, body, token):
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    url = "http://127.0.0.1:9000" + path + ("?" + canonical_query(query) if query else "")
    digest = hashlib.sha256(body).hexdigest()
    given = {"X-Amz-Content-Sha256": digest, **({"Content-Type": "application/octet-stream"} if body else {})}
    theirs = AWSRequest(method, url, headers=dict(given), data=body)
    S3SigV4Auth(Credentials("AKIDEXAMPLE", "secret/key+example", token), "s3", "eu-west-1").add_auth(theirs)
    when = datetime.datetime.strptime(theirs.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
    ours = sigv4_headers(
        method,
        url,
        given,
        digest,
        access_key="AKIDEXAMPLE",
        secret_key="secret/key+example",
        session_token=token,
        region="eu-west-1",
        service="s3",
        now=when.replace(tzinfo=datetime.UTC),
    )
    assert ours["Authorization"] == theirs.headers["Authorization"]
    assert ours.get("X-Amz-Security-Token") == token


def test_a_directory_store_puts_whole_files_and_lists_one_directory(tmp_path: Path):
    store = open_pod_store(f"file://{tmp_path}/logs/run", {})
    assert isinstance(store, DirectoryStore) and store.list("attempt-1/rank-0") == []
    store.put("attempt-1/rank-0/00000000-5.log", b"a\n")
    store.put("attempt-1/rank-0/00000001-6.log", b"b\n")
    store.put("attempt-1/rank-1/00000000-5.log", b"c\n")
    assert store.list("attempt-1/rank-0") == ["00000000-5.log", "00000001-6.log"]
    assert (tmp_path / "logs/run/attempt-1/rank-1/00000000-5.log").read_bytes() == b"c\n"


def test_s3_with_the_env_credentials_and_endpoint(s3, tmp_path: Path):
    root = f"launcher/{tmp_path.name}"
    store = open_pod_store(f"s3://{s3.bucket}/{root}", {**s3.env(), **NO_FILES})
    assert isinstance(store, S3Store) and store.list("attempt-1/rank-0") == []
    for i in range(3):
        store.put(f"attempt-1/rank-0/{i:08d}-{i}.log", f"line {i}\n".encode())
    store.put("attempt-1/rank-0/sub/other.log", b"x")  # not a chunk of this directory
    store.put("attempt-1/rank-00/00000000-0.log", b"x")  # a prefix of it, not it
    assert store.list("attempt-1/rank-0") == [f"{i:08d}-{i}.log" for i in range(3)]
    got = s3.client.get_object(Bucket=s3.bucket, Key=f"{root}/attempt-1/rank-0/00000001-1.log")
    assert got["Body"].read() == b"line 1\n" and got["ContentType"] == "application/octet-stream"


def test_s3_from_an_s3_secrets_files_alone(s3, tmp_path: Path):
    """As an s3 secret reaches a pod: AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE, whose
    default profile names the region and the endpoint; no AWS_* credentials in the env."""
    env = s3.env()
    (tmp_path / "credentials").write_text(
        f"[default]\naws_access_key_id = {env['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {env['AWS_SECRET_ACCESS_KEY']}\n"
    )
    (tmp_path / "config").write_text(f"[default]\nregion = eu-central-1\nendpoint_url = {s3.endpoint}\n")
    root = f"logs/{tmp_path.name}"  # moto keeps its buckets for the whole test process
    store = open_pod_store(
        f"s3://{s3.bucket}/{root}",
        {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"), "AWS_CONFIG_FILE": str(tmp_path / "config")},
    )
    assert (store.region, store.base) == ("eu-central-1", f"{s3.endpoint}/{s3.bucket}")
    store.put("r/attempt-1/rank-0/00000000-1.log", b"from the files\n")
    assert s3.keys(f"{root}/") == [f"{root}/r/attempt-1/rank-0/00000000-1.log"]
    assert store.list("r/attempt-1/rank-0") == ["00000000-1.log"]


def test_aws_addressing_without_an_endpoint_is_virtual_hosted_by_region():
    env = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "eu-west-1", **NO_FILES}
    assert open_pod_store("s3://my-bucket/p", env).base == "https://my-bucket.s3.eu-west-1.amazonaws.com"
    assert open_pod_store("s3://my.dotted.bucket/p", env).base == "https://s3.eu-west-1.amazonaws.com/my.dotted.bucket"


def test_s3_failures_are_one_line_with_the_status_and_s3s_error_and_no_secret(s3):
    env = {**s3.env(), "AWS_SECRET_ACCESS_KEY": "a-secret-that-must-not-show", **NO_FILES}
    with pytest.raises(ArchiveStoreError) as e:
        open_pod_store("s3://no-such-bucket/logs", env).put("a/b.log", b"x")
    assert str(e.value).startswith(
        f"S3 at {s3.endpoint} answered 404 Not Found to PUT {s3.endpoint}/no-such-bucket/logs/a/b.log: NoSuchBucket: "
    )
    assert e.value.status == 404 and "\n" not in str(e.value) and "a-secret" not in str(e.value)
    with pytest.raises(ArchiveStoreError, match=r"^cannot reach S3 at http://127\.0\.0\.1:9 \(PUT "):
        open_pod_store("s3://b/logs", {**env, "S3_ENDPOINT_URL": "http://127.0.0.1:9"}).put("a.log", b"x")


def test_s3_without_credentials_says_where_they_are_looked_for():
    with pytest.raises(ArchiveStoreError) as e:
        open_pod_store("s3://b/logs", dict(NO_FILES))
    assert str(e.value) == (
        "s3://b/logs needs AWS credentials: none in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
        "or in the shared credentials file (profile default); give the profile's "
        "log_store_secret an s3 secret"
    )


def test_a_volume_on_the_files_api(databricks_files):
    store = open_pod_store("dbfs:/Volumes/main/default/data/logs/run-a", databricks_files.env())
    assert isinstance(store, VolumeStore) and store.list("attempt-1/rank-0") == []  # no directory yet
    for i in range(3):
        store.put(f"attempt-1/rank-0/{i:08d}-{i}.log", f"line {i}\n".encode())
    store.put("attempt-1/rank-0/sub/x.log", b"x")
    assert store.list("attempt-1/rank-0") == [f"{i:08d}-{i}.log" for i in range(3)]
    assert databricks_files.read("/Volumes/main/default/data/logs/run-a/attempt-1/rank-0/00000002-2.log") == b"line 2\n"
    assert ("PUT", "/Volumes/main/default/data/logs/run-a/attempt-1/rank-0/00000000-0.log") in databricks_files.requests


def test_volume_failures_are_one_line_with_the_status_and_the_apis_error_and_no_token(databricks_files):
    wrong = "dapi-wrong-token-0123456789"
    with pytest.raises(ArchiveStoreError) as e:
        open_pod_store("dbfs:/Volumes/main/default/data/logs", databricks_files.env(wrong)).put("a.log", b"x")
    assert str(e.value) == (
        f"Databricks at {databricks_files.host} answered 401 Unauthorized to PUT "
        f"{databricks_files.host}/api/2.0/fs/files/Volumes/main/default/data/logs/a.log: "
        "UNAUTHENTICATED: Invalid access token."
    )
    assert wrong not in str(e.value)
    with pytest.raises(
        ArchiveStoreError,
        match=r"answered 404 Not Found to PUT .*: NOT_FOUND: Volume "
        r"'main\.default\.nope' does not exist\.$",
    ):
        open_pod_store("dbfs:/Volumes/main/default/nope/logs", databricks_files.env()).put("a.log", b"x")
    databricks_files.fail(
        "GET", "/Volumes/main/default/data/logs/r", status=503, code="TEMPORARILY_UNAVAILABLE", message="try later"
    )
    with pytest.raises(ArchiveStoreError, match=r"answered 503 .*: TEMPORARILY_UNAVAILABLE: try later$"):
        open_pod_store("dbfs:/Volumes/main/default/data/logs", databricks_files.env()).list("r")


def test_a_volume_without_credentials_names_what_is_missing():
    with pytest.raises(
        ArchiveStoreError,
        match=r"^dbfs:/Volumes/c/s/v/logs needs DATABRICKS_HOST and "
        r"DATABRICKS_TOKEN; give the profile's log_store_secret a "
        r"databricks secret$",
    ):
        open_pod_store("dbfs:/Volumes/c/s/v/logs/", {})
    host_only = open_pod_store(
        "dbfs:/Volumes/c/s/v/logs", {"DATABRICKS_HOST": "adb-1.azuredatabricks.net", "DATABRICKS_TOKEN": "dapi-x"}
    )
    assert host_only.host == "https://adb-1.azuredatabricks.net"


@pytest.mark.parametrize(
    "url, message",
    [
        (
            "gs://bucket/logs",
            "gs:// is not supported by the pod's entrypoint; use s3://<bucket>/<prefix>, "
            "dbfs:/Volumes/<catalog>/<schema>/<volume>/... or a path (or file://) on a volume every "
            "pod mounts",
        ),
        (
            "dbfs:/mnt/logs",
            "dbfs:/mnt/logs: only Unity Catalog Volumes (dbfs:/Volumes/<catalog>/<schema>/<volume>/...) "
            "are supported for dbfs: paths",
        ),
        ("s3:///logs", "s3:///logs: an s3:// URL names a bucket (s3://<bucket>/<prefix>)"),
    ],
)
def test_a_url_no_pod_can_write_is_refused_in_one_line(url, message):
    with pytest.raises(ArchiveStoreError) as e:
        open_pod_store(url, {})
    assert str(e.value) == message

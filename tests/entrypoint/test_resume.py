"""A retried attempt's LAUNCHER_RESUME_FROM from a remote save_folder, listed by the rank's own
stores (launcher.entrypoint.archive_stores): a bucket on moto S3, a Volume on the fake
Databricks Files API; a store that refuses or cannot be opened is one log line and no variable."""

from __future__ import annotations

from tests.entrypoint.conftest import Entrypoint

PRINT = 'echo "RESUME_FROM=${LAUNCHER_RESUME_FROM-<unset>}"'
# A complete checkpoint, a newer one, a newer name still being written, an empty one and a
# sharded checkpoint's directory without its .metadata (never finished): the newer is chosen.
CHECKPOINTS = {
    "ep0-ba10-rank0.pt": b"weights",
    "ep0-ba20-rank0.pt": b"newer weights",
    "ep0-ba30-rank0.pt.tmp": b"half",
    "ep0-ba25-rank0.pt": b"",
    "ep0-ba40/__0_0.distcp": b"shard",
    "notes.txt": b"not a checkpoint",
}


def spec(folder: str) -> dict:
    return {"command": PRINT, "parameters": {"save_folder": folder}}


def retried(entry: Entrypoint, folder: str, extra: dict[str, str] | None = None) -> str:
    result = entry.run(spec(folder), extra={"LAUNCHER_ATTEMPT": "2", **(extra or {})})
    assert result.code == 0, result.out
    return result.out


def test_a_retry_resumes_from_the_newest_complete_object_in_s3(entry, s3):
    for name, data in CHECKPOINTS.items():
        s3.client.put_object(Bucket=s3.bucket, Key=f"ckpt/test-run/{name}", Body=data)
    out = retried(entry, "s3://launcher-test/ckpt/{run_name}")
    url = "s3://launcher-test/ckpt/test-run/ep0-ba20-rank0.pt"
    assert f"RESUME_FROM={url}\n" in out
    assert f"[launcher] resume: attempt 2 resumes from {url} (step 20) (LAUNCHER_RESUME_FROM)" in out

    # A sharded checkpoint's directory counts once its .metadata is there.
    s3.client.put_object(Bucket=s3.bucket, Key="ckpt/test-run/ep0-ba40/.metadata", Body=b"m")
    out = retried(entry, "s3://launcher-test/ckpt/{run_name}/")
    assert "RESUME_FROM=s3://launcher-test/ckpt/test-run/ep0-ba40\n" in out


def test_a_retry_resumes_from_the_newest_complete_file_on_a_volume(entry, databricks_files):
    root = "/Volumes/main/default/data/ckpt"
    for name, data in CHECKPOINTS.items():
        databricks_files.write(f"{root}/{name}", data)
    out = retried(entry, "dbfs:/Volumes/main/default/data/ckpt", databricks_files.env())
    url = "dbfs:/Volumes/main/default/data/ckpt/ep0-ba20-rank0.pt"
    assert f"RESUME_FROM={url}\n" in out
    assert f"resumes from {url} (step 20)" in out


def test_a_store_that_refuses_is_one_line_and_no_variable(entry, databricks_files, monkeypatch):
    databricks_files.write("/Volumes/main/default/data/ckpt/ep0-ba10-rank0.pt", b"weights")
    wrong = "dapi-wrong-token-5150"
    out = retried(entry, "dbfs:/Volumes/main/default/data/ckpt", databricks_files.env(token=wrong))
    assert "RESUME_FROM=<unset>" in out
    (line,) = [ln for ln in out.splitlines() if "resume:" in ln]
    assert line.startswith(
        f"[launcher] resume: attempt 2: cannot look in dbfs:/Volumes/main/default/data/ckpt: "
        f"Databricks at {databricks_files.host} answered 401 Unauthorized to GET "
    ), line
    assert line.endswith("; LAUNCHER_RESUME_FROM is not set"), line
    assert wrong not in out

    # No credentials at all: said before any request.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    out = retried(entry, "s3://launcher-test/ckpt", {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"})
    assert "RESUME_FROM=<unset>" in out
    assert (
        "[launcher] resume: attempt 2: cannot look in s3://launcher-test/ckpt: s3://launcher-test/ckpt needs AWS "
        in out
    )

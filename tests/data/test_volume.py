"""Converting onto a Unity Catalog Volume through the real databricks-sdk, against the fake
Files API, and reading it back through the same fake with StreamingDataset."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import needs

needs("streaming", reason="needs the train extra")

from launcher.data.convert import convert

from .conftest import cli_run, documents, expected_stream, read_samples, write_jsonl

pytestmark = pytest.mark.train

VOL = "dbfs:/Volumes/main/default/data"
SEQ = 64


def test_upload_to_volume_and_read_back(tmp_path: Path, tokenizer_dir: Path, volume_env, capsys) -> None:
    fake = volume_env
    docs = documents(1200)
    src = write_jsonl(tmp_path / "in.jsonl", docs)
    stream = expected_stream(tokenizer_dir, docs)
    out = f"{VOL}/corpus"

    code, stdout, err = cli_run(
        capsys,
        "data",
        "convert",
        src,
        "--out",
        out,
        "--tokenizer",
        tokenizer_dir,
        "--concat-tokens",
        SEQ,
        "--workers",
        "2",
        "--shard-size",
        "8kb",
    )

    assert code == 0, err
    assert f"data: {{remote: {out}}}" in stdout
    stored = fake.paths("/Volumes/main/default/data/corpus/train")
    shards = [p for p in stored if ".mds" in p]
    assert len(shards) > 4
    # Published last: the sidecar, then index.json; no request came after them.
    puts = [p for m, p in fake.requests if m == "PUT"]
    assert puts[-2:] == [f"{out[5:]}/train/launcher_dataset.json", f"{out[5:]}/train/index.json"]
    side = json.loads(fake.read(f"{out}/train/launcher_dataset.json"))
    assert side["samples"] == len(stream) // SEQ and side["format"] == "launcher.tokens.v1"
    index = json.loads(fake.read(f"{out}/train/index.json"))
    assert sum(s["samples"] for s in index["shards"]) == side["samples"]
    # Read back through the fake: the same samples as the same conversion to a local directory.
    samples = read_samples(out)
    assert len(samples) == len(stream) // SEQ
    convert([str(src)], str(tmp_path / "local"), str(tokenizer_dir), SEQ, workers=2, shard_size=8192)
    assert samples == read_samples(str(tmp_path / "local"))


def test_single_worker_volume_round_trip_is_the_stream(tmp_path: Path, tokenizer_dir: Path, volume_env) -> None:
    docs = documents(500)
    stream = expected_stream(tokenizer_dir, docs)
    s = convert([str(write_jsonl(tmp_path / "in.jsonl", docs))], f"{VOL}/one", str(tokenizer_dir), SEQ)
    assert s.url == f"{VOL}/one/train" and s.remote == f"{VOL}/one"
    samples = read_samples(f"{VOL}/one")
    assert [t for x in samples for t in x] == stream[: len(stream) // SEQ * SEQ]


def test_bad_token_fails_fast_with_exit_2_and_writes_nothing(
    tmp_path: Path, tokenizer_dir: Path, databricks_files, monkeypatch, capsys
) -> None:
    for k, v in databricks_files.env(token="dapi-wrong").items():
        monkeypatch.setenv(k, v)
    src = write_jsonl(tmp_path / "in.jsonl", documents(100))

    started = time.monotonic()
    code, _, err = cli_run(
        capsys, "data", "convert", src, "--out", f"{VOL}/x", "--tokenizer", tokenizer_dir, "--concat-tokens", SEQ
    )

    assert time.monotonic() - started < 15
    assert code == 2
    assert (
        f"Databricks at {databricks_files.host} rejected the token (401 Unauthenticated) while checking {VOL}/x" in err
    )
    assert "check DATABRICKS_TOKEN" in err
    assert "dapi-wrong" not in err and "Traceback" not in err
    assert databricks_files.paths("/Volumes") == []


def test_missing_credentials_and_missing_volume(
    tmp_path: Path, tokenizer_dir: Path, databricks_files, monkeypatch, capsys
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", documents(50))
    monkeypatch.delenv("DATABRICKS_HOST", raising=False)
    monkeypatch.delenv("DATABRICKS_TOKEN", raising=False)
    code, _, err = cli_run(
        capsys, "data", "convert", src, "--out", f"{VOL}/x", "--tokenizer", tokenizer_dir, "--concat-tokens", SEQ
    )
    assert (
        code == 2
        and f"--out {VOL}/x needs Databricks credentials, but DATABRICKS_HOST and DATABRICKS_TOKEN are not set" in err
    )

    for k, v in databricks_files.env().items():
        monkeypatch.setenv(k, v)
    code, _, err = cli_run(
        capsys,
        "data",
        "convert",
        src,
        "--out",
        "dbfs:/Volumes/main/default/nope/x",
        "--tokenizer",
        tokenizer_dir,
        "--concat-tokens",
        SEQ,
    )
    assert code == 2 and "Volume main.default.nope does not exist" in err


def test_failed_upload_publishes_nothing_and_cleans_up(tmp_path: Path, tokenizer_dir: Path, volume_env, capsys) -> None:
    fake = volume_env
    fake.fail("PUT", "*/shard.00003.mds.zstd", status=500, code="INTERNAL_ERROR", message="disk on fire")
    src = write_jsonl(tmp_path / "in.jsonl", documents(800))

    code, _, err = cli_run(
        capsys,
        "data",
        "convert",
        src,
        "--out",
        f"{VOL}/broken",
        "--tokenizer",
        tokenizer_dir,
        "--concat-tokens",
        SEQ,
        "--shard-size",
        "4kb",
    )

    assert code == 1
    assert "uploading dbfs:/Volumes/main/default/data/broken/train/shard.00003.mds.zstd" in err
    assert "disk on fire" in err
    assert not fake.exists(f"{VOL}/broken/train/index.json")
    assert not fake.exists(f"{VOL}/broken/train/launcher_dataset.json")
    assert fake.paths("/Volumes/main/default/data/broken") == []  # uploaded shards removed again


def test_existing_dataset_needs_overwrite(tmp_path: Path, tokenizer_dir: Path, volume_env, capsys) -> None:
    fake = volume_env
    a = write_jsonl(tmp_path / "a.jsonl", documents(300))
    b = write_jsonl(tmp_path / "b.jsonl", documents(600, start=300))
    args = ["--out", f"{VOL}/ds", "--tokenizer", tokenizer_dir, "--concat-tokens", SEQ]
    assert cli_run(capsys, "data", "convert", a, *args)[0] == 0
    first = fake.read(f"{VOL}/ds/train/index.json")

    code, _, err = cli_run(capsys, "data", "convert", b, *args)
    assert code == 2 and "already holds a dataset; pass --overwrite" in err
    assert fake.read(f"{VOL}/ds/train/index.json") == first

    assert cli_run(capsys, "data", "convert", b, *args, "--overwrite")[0] == 0
    side = json.loads(fake.read(f"{VOL}/ds/train/launcher_dataset.json"))
    assert side["documents"] == 600


def test_credentials_come_from_the_secret_store(
    tmp_path: Path, tokenizer_dir: Path, databricks_files, launcher_home, monkeypatch, capsys
) -> None:
    from launcher.secrets.kinds import Secret, SecretKind
    from launcher.secrets.store import LocalSecretStore

    monkeypatch.delenv("DATABRICKS_HOST", raising=False)
    monkeypatch.delenv("DATABRICKS_TOKEN", raising=False)
    env = databricks_files.env()
    LocalSecretStore(launcher_home).create(
        Secret(
            name="databricks",
            kind=SecretKind.DATABRICKS,
            data={"host": env["DATABRICKS_HOST"], "token": env["DATABRICKS_TOKEN"]},
        )
    )
    src = write_jsonl(tmp_path / "in.jsonl", documents(200))
    code, stdout, err = cli_run(
        capsys,
        "data",
        "convert",
        src,
        "--out",
        f"{VOL}/from-store",
        "--tokenizer",
        tokenizer_dir,
        "--concat-tokens",
        SEQ,
    )
    assert code == 0, err
    assert env["DATABRICKS_TOKEN"] not in stdout + err
    assert f"{VOL[5:]}/from-store/train/index.json" in databricks_files.paths(
        "/Volumes/main/default/data/from-store/train"
    )


def test_inputs_read_from_a_volume_with_a_glob_and_compression(
    tmp_path: Path, tokenizer_dir: Path, volume_env, capsys
) -> None:
    import gzip

    from tests.train.conftest import upload_tree

    docs = documents(300)
    src = tmp_path / "src"
    write_jsonl(src / "a.jsonl", docs[:100])
    write_jsonl(src / "b.jsonl", docs[100:200])
    (src / "c.jsonl.gz").write_bytes(gzip.compress((write_jsonl(tmp_path / "c.jsonl", docs[200:])).read_bytes()))
    (src / "notes.md.txt").write_text("not matched")
    upload_tree(volume_env, src, f"{VOL}/raw")

    code, _stdout, err = cli_run(
        capsys,
        "data",
        "convert",
        f"{VOL}/raw/*.jsonl*",
        "--out",
        tmp_path / "out",
        "--tokenizer",
        tokenizer_dir,
        "--concat-tokens",
        SEQ,
        "--workers",
        "2",
    )

    assert code == 0, err
    assert json.loads((tmp_path / "out" / "train" / "launcher_dataset.json").read_text())["documents"] == 300
    stream = expected_stream(tokenizer_dir, docs)
    assert [t for x in read_samples(str(tmp_path / "out")) for t in x] == stream[: len(stream) // SEQ * SEQ]

    code, _, err = cli_run(
        capsys,
        "data",
        "convert",
        f"{VOL}/raw/*.parquet",
        "--out",
        tmp_path / "none",
        "--tokenizer",
        tokenizer_dir,
        "--concat-tokens",
        SEQ,
    )
    assert code == 2 and f"no files match {VOL}/raw/*.parquet" in err

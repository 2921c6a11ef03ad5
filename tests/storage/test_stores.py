"""One set of operations on every scheme, each through its real client: a local directory,
fsspec's memory://, dbfs:/Volumes on the fake Files API, s3:// on moto."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from launcher.storage import Credentials, StorageNotFoundError, open_store

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["local", "memory", "volume", "s3"])
def store(request, tmp_path: Path):
    if request.param == "local":
        return open_store(str(tmp_path / "root"))
    if request.param == "memory":
        return open_store(f"memory:///store-{id(tmp_path)}")
    if request.param == "volume":
        pytest.importorskip("databricks.sdk")
        fake = request.getfixturevalue("databricks_files")
        return open_store("dbfs:/Volumes/main/default/data/root", Credentials(fake.env()))
    request.getfixturevalue("s3")
    return open_store("s3://launcher-test/root")


def test_round_trip(store, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "train" / "part").mkdir(parents=True)
    (src / "train" / "a.jsonl").write_bytes(b'{"text": "a"}\n')
    (src / "train" / "part" / "b.jsonl").write_bytes(b"b" * 3000)
    (src / "done").write_bytes(b"")
    assert not store.exists("train")

    assert store.upload_tree(src, "ds", last=("done",)) == 3
    assert store.files() == ["ds/done", "ds/train/a.jsonl", "ds/train/part/b.jsonl"]
    assert store.files("ds/train") == ["ds/train/a.jsonl", "ds/train/part/b.jsonl"]
    assert store.files("nothing") == []
    assert store.exists("ds/train") and store.isdir("ds/train")
    assert store.exists("ds/train/a.jsonl") and not store.isdir("ds/train/a.jsonl")
    assert store.glob("ds/train/*.jsonl") == ["ds/train/a.jsonl"]
    assert store.glob("ds/**/*.jsonl") == ["ds/train/a.jsonl", "ds/train/part/b.jsonl"]
    assert store.read("ds/train/a.jsonl") == b'{"text": "a"}\n'
    assert store.size("ds/train/part/b.jsonl") == 3000
    with store.open("ds/train/part/b.jsonl") as f:
        f.seek(2990)
        assert f.read() == b"b" * 10

    assert store.download_tree(tmp_path / "copy", "ds/train") == 2
    assert (tmp_path / "copy" / "part" / "b.jsonl").read_bytes() == b"b" * 3000
    with pytest.raises(StorageNotFoundError, match="is empty or does not exist"):
        store.download_tree(tmp_path / "none", "nothing")

    store.delete("ds/done")
    assert not store.exists("ds/done")
    with pytest.raises(StorageNotFoundError):
        store.delete("ds/done")
    store.check()


def test_write_puts_bytes_at_a_new_path_and_replaces_them(store) -> None:
    store.write("logs/run/attempt-1/rank-0/00000000-1.log", b"line 1\nline 2\n")
    store.write("logs/run/attempt-1/rank-0/00000001-2.log", b"")
    assert store.files("logs/run") == [
        "logs/run/attempt-1/rank-0/00000000-1.log",
        "logs/run/attempt-1/rank-0/00000001-2.log",
    ]
    assert store.read("logs/run/attempt-1/rank-0/00000000-1.log") == b"line 1\nline 2\n"
    assert store.read("logs/run/attempt-1/rank-0/00000001-2.log") == b""
    store.write("logs/run/attempt-1/rank-0/00000000-1.log", b"again\n")
    assert store.read("logs/run/attempt-1/rank-0/00000000-1.log") == b"again\n"


def test_importing_storage_loads_no_client() -> None:
    code = (
        "import sys, launcher.storage, launcher.data.remote, launcher.train.preflight\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'databricks', 'fsspec', 'boto3', 'botocore', 'requests'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

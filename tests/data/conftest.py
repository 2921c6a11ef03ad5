"""Shared pieces for the data tests: a tokenizer trained here (the hub is unreachable), a
corpus whose token stream the tests compute independently, and readers of the output."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.cli.error_report import run_cli
from launcher.cli.main import cli
from launcher.data.synthetic import say

EOS = "<|endoftext|>"


def documents(n: int, start: int = 0) -> list[str]:
    """Distinct documents of a few sentences each, some with non-ASCII text."""
    docs = []
    for i in range(start, start + n):
        words = " ".join(say(i * 7919 + k) for k in range(i % 4 + 1))
        docs.append(f"Document {i}: {words}." + (" Ünïcödé ✓" if i % 5 == 0 else ""))
    return docs


def write_jsonl(path: Path, docs: list[str], column: str = "text", **extra) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for i, d in enumerate(docs):
            f.write(json.dumps({"id": i, column: d, **extra}) + "\n")
    return path


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level BPE trained on the test documents with the public API."""
    from launcher.data.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("tok")
    corpus = write_jsonl(root / "corpus.jsonl", documents(2000))
    return train_tokenizer([str(corpus)], 600, root / "tokenizer")


def expected_stream(tokenizer_dir: Path, docs: list[str], eos: str = EOS, bos: str = "") -> list[int]:
    """The token stream computed with the tokenizers library directly, not with our code."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    sep_eos = tok.encode(eos, add_special_tokens=False).ids if eos else []
    sep_bos = tok.encode(bos, add_special_tokens=False).ids if bos else []
    stream: list[int] = []
    for d in docs:
        stream += sep_bos + tok.encode(d, add_special_tokens=False).ids + sep_eos
    return stream


def read_samples(remote: str, split: str = "train", dtype: str = "uint16") -> list[list[int]]:
    """Read a converted split back with StreamingDataset, in order."""
    import tempfile

    import numpy as np
    from streaming import StreamingDataset

    from launcher.data.format import numpy_dtype
    from launcher.train.data import shared_memory_registration

    with tempfile.TemporaryDirectory(prefix="stream-cache-") as cache:
        # Take turns with trainings on this host (the other xdist worker's) to register
        # streaming's shared memory, as the trainer does: else both may pick one prefix.
        with shared_memory_registration():
            ds = StreamingDataset(remote=remote, local=cache, split=split, shuffle=False, batch_size=1)
        return [np.frombuffer(ds[i]["tokens"], dtype=numpy_dtype(dtype)).tolist() for i in range(len(ds))]


def read_sidecar(out: Path | str, split: str = "train") -> dict:
    from launcher.data.format import SIDECAR_NAME, check_sidecar

    return check_sidecar(json.loads((Path(out) / split / SIDECAR_NAME).read_text()))


def cli_run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = run_cli(cli, [str(a) for a in args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.fixture
def volume_env(databricks_files, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """The fake Files API, with DATABRICKS_HOST/TOKEN pointing at it."""
    for k, v in databricks_files.env().items():
        monkeypatch.setenv(k, v)
    yield databricks_files


@pytest.fixture(scope="session")
def spark():
    """One local[1] SparkSession for every Spark test (starting one costs seconds), the one
    `launcher data convert` starts itself (launcher.data.spark.spark_session); stopped at the end."""
    pytest.importorskip("pyspark", reason="needs the spark extra")
    from launcher.data.spark import spark_session

    session = spark_session("launcher-tests", 1)
    session.conf.set("spark.sql.shuffle.partitions", "1")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def wordpiece_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A WordPiece tokenizer trained on synthetic reviews."""
    from launcher.data.synthetic import write_sentiment
    from launcher.data.tokenizer import train_wordpiece

    root = tmp_path_factory.mktemp("wordpiece")
    write_sentiment(root / "reviews.jsonl", 500, seed=0)
    return train_wordpiece([str(root / "reviews.jsonl")], 200, root / "tokenizer")

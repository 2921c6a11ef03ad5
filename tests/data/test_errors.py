"""Bad inputs: a clear one-line message, exit code 2, no traceback, and nothing left that
looks like a complete dataset."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import needs

needs("streaming", reason="needs the train extra")

from .conftest import cli_run, documents, write_jsonl

pytestmark = pytest.mark.train

SEQ = 64


def _convert(capsys, src, out, tok, *extra) -> tuple[int, str]:
    code, _, err = cli_run(
        capsys, "data", "convert", src, "--out", out, "--tokenizer", tok, "--concat-tokens", SEQ, *extra
    )
    assert "Traceback" not in err
    return code, err


def _nothing_published(out: Path) -> bool:
    """No index.json anywhere under OUT and no staging directory left."""
    return not out.exists() or (
        not list(out.rglob("index.json")) and not [p for p in out.iterdir() if ".partial-" in p.name]
    )


def test_missing_column_names_the_columns_there_are(tmp_path: Path, tokenizer_dir: Path, capsys) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", documents(20), column="body")
    code, err = _convert(capsys, src, tmp_path / "out", tokenizer_dir)
    assert code == 2
    assert f"✗ {src}: no column 'text' (columns: body, id); choose one with --text-column" in err
    assert _nothing_published(tmp_path / "out")


def test_missing_column_in_parquet_with_workers(tmp_path: Path, tokenizer_dir: Path, capsys) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"content": ["a", "b"]}), tmp_path / "in.parquet")
    code, err = _convert(capsys, tmp_path / "in.parquet", tmp_path / "out", tokenizer_dir, "--workers", "2")
    assert code == 2 and "no column 'text' (columns: content)" in err
    assert _nothing_published(tmp_path / "out")


def test_a_record_without_text_fails_with_its_number(tmp_path: Path, tokenizer_dir: Path, capsys) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "one"}\n{"text": "two"}\n{"other": 3}\n')
    code, err = _convert(capsys, src, tmp_path / "out", tokenizer_dir)
    assert code == 2 and "record 3 has no 'text' value" in err
    assert _nothing_published(tmp_path / "out")


def test_empty_input(tmp_path: Path, tokenizer_dir: Path, capsys) -> None:
    src = tmp_path / "empty.jsonl"
    src.write_text("")
    code, err = _convert(capsys, src, tmp_path / "out", tokenizer_dir, "--workers", "3")
    assert code == 2 and f"no documents in {src}" in err
    assert _nothing_published(tmp_path / "out")


def test_too_little_text_for_one_sample(tmp_path: Path, tokenizer_dir: Path, capsys) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", ["tiny"])
    code, err = _convert(capsys, src, tmp_path / "out", tokenizer_dir)
    assert code == 2 and "fewer than --concat-tokens 64: no sample to write" in err
    assert _nothing_published(tmp_path / "out")


def test_unknown_tokenizer(tmp_path: Path, capsys, monkeypatch) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", documents(5))
    code, err = _convert(capsys, src, tmp_path / "out", "./no/such/tokenizer")
    assert code == 2 and "no tokenizer directory at ./no/such/tokenizer" in err

    # A hub name while the hub is unreachable (offline mode makes that certain here).
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, err = _convert(capsys, src, tmp_path / "out", "no-such-org/no-such-tokenizer")
    assert code == 2
    assert "cannot load tokenizer 'no-such-org/no-such-tokenizer': the Hugging Face hub is unreachable" in err
    assert "launcher data tokenizer train" in err

    code, err = _convert(capsys, src, tmp_path / "out", "not/a/valid/hub/name")
    assert code == 2 and "unknown tokenizer 'not/a/valid/hub/name'" in err
    assert _nothing_published(tmp_path / "out")


def test_inputs_that_are_not_there_or_not_supported(tmp_path: Path, tokenizer_dir: Path, capsys) -> None:
    code, err = _convert(capsys, tmp_path / "nope.jsonl", tmp_path / "out", tokenizer_dir)
    assert code == 2 and f"input not found: {tmp_path / 'nope.jsonl'}" in err
    code, err = _convert(capsys, tmp_path / "*.parquet", tmp_path / "out", tokenizer_dir)
    assert code == 2 and "no files match" in err
    (tmp_path / "data.xml").write_text("<a/>")
    code, err = _convert(capsys, tmp_path / "data.xml", tmp_path / "out", tokenizer_dir)
    assert code == 2 and "unknown input format" in err
    (tmp_path / "dir").mkdir()
    code, err = _convert(capsys, tmp_path / "dir", tmp_path / "out", tokenizer_dir)
    assert code == 2 and "not a Hugging Face dataset" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not json\n")
    code, err = _convert(capsys, bad, tmp_path / "out", tokenizer_dir)
    assert code == 2 and "not JSON Lines" in err
    assert _nothing_published(tmp_path / "out")


def test_bad_flags(tmp_path: Path, tokenizer_dir: Path, capsys) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", documents(5))
    out = tmp_path / "out"
    assert (
        _convert(capsys, src, out, tokenizer_dir, "--compression", "lzma")[1].count(
            "--compression 'lzma' is not one of"
        )
        == 1
    )
    code, err = _convert(capsys, src, out, tokenizer_dir, "--workers", "0")
    assert code == 2 and "--workers must be at least 1" in err
    code, err = _convert(capsys, src, "ftp://host/x", tokenizer_dir)
    assert code == 2 and "unsupported scheme ftp://" in err
    code, err = _convert(capsys, src, "dbfs:/tmp/x", tokenizer_dir)
    assert code == 2 and "dbfs:/Volumes/<catalog>/<schema>/<volume>" in err
    code, err = _convert(capsys, src, out, tokenizer_dir, "--split", "../up")
    assert code == 2 and "--split must be a plain name" in err
    code, err = _convert(capsys, src, out, tokenizer_dir, "--engine", "dask")
    assert code == 2 and "'dask' is not one of 'local', 'spark'" in err
    assert _nothing_published(out)


def test_existing_local_dataset_needs_overwrite(tmp_path: Path, tokenizer_dir: Path, capsys) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", documents(300))
    b = write_jsonl(tmp_path / "b.jsonl", documents(500))
    out = tmp_path / "out"
    assert _convert(capsys, a, out, tokenizer_dir)[0] == 0
    before = (out / "train" / "index.json").read_bytes()
    code, err = _convert(capsys, b, out, tokenizer_dir)
    assert code == 2 and "already holds a dataset; pass --overwrite" in err
    assert (out / "train" / "index.json").read_bytes() == before
    assert _convert(capsys, b, out, tokenizer_dir, "--overwrite", "--workers", "2")[0] == 0
    assert sorted(p.name for p in out.iterdir()) == ["train"]
    assert '"documents": 500' in (out / "train" / "launcher_dataset.json").read_text()


def test_spark_engine_says_what_is_missing(tmp_path: Path, tokenizer_dir: Path, capsys) -> None:
    try:
        import pyspark  # noqa: F401

        pytest.skip("pyspark is installed")
    except ImportError:
        pass
    src = write_jsonl(tmp_path / "in.jsonl", documents(5))
    code, err = _convert(capsys, src, tmp_path / "out", tokenizer_dir, "--engine", "spark")
    assert code == 2 and "--engine spark needs pyspark: pip install 'launcher[spark]'" in err
    assert _nothing_published(tmp_path / "out")


def test_bad_second_file_after_workers_started_leaves_nothing(tmp_path: Path, tokenizer_dir: Path, capsys) -> None:
    write_jsonl(tmp_path / "in" / "a.jsonl", documents(3000))
    (tmp_path / "in" / "b.jsonl").write_text('{"text": "fine"}\n{"text": broken}\n')
    out = tmp_path / "out"
    code, err = _convert(capsys, tmp_path / "in" / "*.jsonl", out, tokenizer_dir, "--workers", "2")
    assert code == 2 and f"{tmp_path / 'in' / 'b.jsonl'}: JSON parse error" in err
    assert _nothing_published(out) and not list(out.iterdir())

"""`launcher data tokenizer train` and loading tokenizers offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import needs

needs("streaming", reason="needs the train extra")

from .conftest import EOS, cli_run, documents, write_jsonl

pytestmark = pytest.mark.train


def test_train_saves_a_directory_autotokenizer_loads(tmp_path: Path, capsys) -> None:
    from transformers import AutoTokenizer

    src = write_jsonl(tmp_path / "c.jsonl", documents(1500))
    code, out, err = cli_run(
        capsys, "data", "tokenizer", "train", src, "--vocab-size", "400", "--out", tmp_path / "tok"
    )

    assert code == 0, err
    assert "✔ Trained a byte-level BPE tokenizer with 400 tokens" in out
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    assert tok.is_fast and len(tok) == 400
    assert tok.eos_token == EOS and tok.convert_ids_to_tokens(tok.eos_token_id) == EOS
    text = "Document 12: minus four hundred and twelve. Ünïcödé ✓"
    ids = tok(text + EOS, add_special_tokens=False)["input_ids"]
    assert ids[-1] == tok.eos_token_id  # the separator is one special token
    assert tok.decode(ids) == text + EOS  # byte-level: lossless, even for unseen characters
    assert len(ids) < len(text.encode())  # merges were learned


def test_train_on_parquet_column_and_bad_inputs(tmp_path: Path, capsys) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": documents(300)}), tmp_path / "c.parquet")
    code, _, err = cli_run(
        capsys,
        "data",
        "tokenizer",
        "train",
        tmp_path / "c.parquet",
        "--vocab-size",
        "300",
        "--out",
        tmp_path / "tok",
        "--text-column",
        "body",
    )
    assert code == 0, err
    assert json.loads((tmp_path / "tok" / "tokenizer.json").read_text())["model"]["type"] == "BPE"

    code, _, err = cli_run(
        capsys, "data", "tokenizer", "train", tmp_path / "c.parquet", "--vocab-size", "100", "--out", tmp_path / "t2"
    )
    assert code == 2 and "--vocab-size must be at least 257" in err
    code, _, err = cli_run(
        capsys, "data", "tokenizer", "train", tmp_path / "c.parquet", "--vocab-size", "300", "--out", tmp_path / "t3"
    )
    assert code == 2 and "no column 'text' (columns: body)" in err
    (tmp_path / "empty.jsonl").write_text("")
    code, _, err = cli_run(
        capsys, "data", "tokenizer", "train", tmp_path / "empty.jsonl", "--vocab-size", "300", "--out", tmp_path / "t4"
    )
    assert code == 2 and "no documents" in err


def test_load_tokenizer_errors(tmp_path: Path, monkeypatch) -> None:
    from launcher.data.tokenizer import load_tokenizer
    from launcher.errors import InputError

    (tmp_path / "file.json").write_text("{}")
    with pytest.raises(InputError, match="is a file; pass the tokenizer's directory"):
        load_tokenizer(str(tmp_path / "file.json"))
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(InputError, match="is not a Hugging Face tokenizer directory"):
        load_tokenizer(str(tmp_path / "emptydir"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match="hub is unreachable") as info:
        load_tokenizer("gpt2")
    assert "--tokenizer DIR" in (info.value.hint or "")

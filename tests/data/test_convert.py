"""`launcher data convert`, read back with StreamingDataset: exact token streams, every
input format, worker counts, and the published layout."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import needs

needs("streaming", reason="needs the train extra")

from launcher.data.convert import convert

from .conftest import EOS, cli_run, documents, expected_stream, read_samples, read_sidecar, write_jsonl

pytestmark = pytest.mark.train

SEQ = 64


def _flat(samples: list[list[int]]) -> list[int]:
    return [t for s in samples for t in s]


def test_round_trip_cli_exact_stream(tmp_path: Path, tokenizer_dir: Path, capsys) -> None:
    docs = documents(700)
    src = write_jsonl(tmp_path / "in.jsonl", docs)
    stream = expected_stream(tokenizer_dir, docs)
    out = tmp_path / "out"

    code, stdout, err = cli_run(
        capsys, "data", "convert", src, "--out", out, "--tokenizer", tokenizer_dir, "--concat-tokens", SEQ
    )

    assert code == 0, err
    samples = read_samples(str(out))
    n = len(stream) // SEQ
    assert len(samples) == n
    assert all(len(s) == SEQ for s in samples)
    # The remainder is carried across documents: the samples are the stream itself.
    assert _flat(samples) == stream[: n * SEQ]
    side = read_sidecar(out)
    assert (side["dtype"], side["seq_len"], side["samples"], side["documents"]) == ("uint16", SEQ, n, 700)
    assert side["tokens"] == n * SEQ and side["input_tokens"] == len(stream)
    assert side["vocab_size"] == 600 and side["eos_text"] == EOS
    # The summary a user sees, with the line for the run spec.
    assert f"documents   {700:,}" in stdout
    assert f"tokens      {len(stream):,}" in stdout
    assert f"samples     {n:,} x {SEQ} tokens (uint16)" in stdout
    assert "shards      1" in stdout
    assert "tokens/s" in stdout
    assert f"data: {{remote: {out}}}" in stdout
    # Nothing but the split lies in OUT: no staging directory left behind.
    assert sorted(p.name for p in out.iterdir()) == ["train"]


def test_bos_text_and_no_eos(tmp_path: Path, tokenizer_dir: Path) -> None:
    docs = documents(300)
    src = write_jsonl(tmp_path / "in.jsonl", docs)
    summary = convert([str(src)], str(tmp_path / "o"), str(tokenizer_dir), 32, eos_text="", bos_text=EOS)
    stream = expected_stream(tokenizer_dir, docs, eos="", bos=EOS)
    assert _flat(read_samples(str(tmp_path / "o"))) == stream[: len(stream) // 32 * 32]
    assert summary.tokens == len(stream) and summary.samples == len(stream) // 32


def test_four_workers_lose_and_duplicate_nothing(tmp_path: Path, tokenizer_dir: Path) -> None:
    from tokenizers import Tokenizer

    docs = documents(1500)
    src = write_jsonl(tmp_path / "in.jsonl", docs)
    stream = expected_stream(tokenizer_dir, docs)
    one = convert([str(src)], str(tmp_path / "w1"), str(tokenizer_dir), SEQ, workers=1, batch_docs=100)
    four = convert([str(src)], str(tmp_path / "w4"), str(tokenizer_dir), SEQ, workers=4, batch_docs=100)

    n = len(stream) // SEQ
    assert one.samples == four.samples == n
    assert one.tokens == four.tokens == len(stream)
    s4 = read_samples(str(tmp_path / "w4"))
    assert len(s4) == n
    # Every output token comes from the stream; fewer than SEQ tokens are left over.
    left = Counter(stream)
    left.subtract(Counter(_flat(s4)))
    assert min(left.values()) >= 0 and sum(left.values()) == len(stream) - n * SEQ < SEQ
    # Decoded, each document appears at most once; only the few cut at partition
    # boundaries (two per worker at most, plus the tail) are not whole.
    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    pieces = Counter(tok.decode(_flat(s4), skip_special_tokens=False).split(EOS))
    whole = [d for d in docs if pieces[d]]
    assert all(pieces[d] == 1 for d in whole)
    assert len(whole) >= len(docs) - 2 * 5
    # One dataset: a merged index over the partitions, with one sidecar.
    index = json.loads((tmp_path / "w4" / "train" / "index.json").read_text())
    assert {s["raw_data"]["basename"].split("/")[0] for s in index["shards"]} <= {"0", "1", "2", "3", "4"}
    assert read_sidecar(tmp_path / "w4")["samples"] == n


def test_output_is_deterministic_for_a_worker_count(tmp_path: Path, tokenizer_dir: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", documents(900))
    for name in ("a", "b"):
        convert([str(src)], str(tmp_path / name), str(tokenizer_dir), SEQ, workers=3, batch_docs=64, shard_size=4096)
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert files_a == files_b and len(files_a) > 6  # several shards per partition
    for rel in files_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_parquet_csv_and_hf_dataset_inputs(tmp_path: Path, tokenizer_dir: Path) -> None:
    import datasets
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    docs = documents(400)
    # Commas, quotes and newlines inside CSV values must survive.
    docs[3] = 'A "quoted", multi-line\ndocument, with commas'
    stream = expected_stream(tokenizer_dir, docs)
    table = pa.table({"n": list(range(len(docs))), "body": docs})
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=77)
    pacsv.write_csv(table, tmp_path / "in.csv")
    datasets.Dataset.from_dict({"body": docs, "n": list(range(len(docs)))}).save_to_disk(str(tmp_path / "hf"))

    for name, src in (("pq", "in.parquet"), ("csv", "in.csv"), ("hf", "hf")):
        s = convert([str(tmp_path / src)], str(tmp_path / f"out-{name}"), str(tokenizer_dir), SEQ, text_column="body")
        assert s.documents == len(docs), name
        assert _flat(read_samples(str(tmp_path / f"out-{name}"))) == stream[: len(stream) // SEQ * SEQ], name


def test_glob_of_files_and_text_files_in_sorted_order(tmp_path: Path, tokenizer_dir: Path) -> None:
    parts = [documents(150, start=i * 150) for i in range(3)]
    for i, docs in enumerate(parts):
        write_jsonl(tmp_path / "shards" / f"part-{i}.jsonl", docs)
    s = convert([str(tmp_path / "shards" / "*.jsonl")], str(tmp_path / "o"), str(tokenizer_dir), SEQ)
    stream = expected_stream(tokenizer_dir, parts[0] + parts[1] + parts[2])
    assert s.documents == 450
    assert _flat(read_samples(str(tmp_path / "o"))) == stream[: len(stream) // SEQ * SEQ]

    # Plain text: one document per file.
    texts = [" ".join(documents(20, start=j * 20)) for j in range(4)]
    for j, t in enumerate(texts):
        (tmp_path / "txt").mkdir(exist_ok=True)
        (tmp_path / "txt" / f"{j}.txt").write_text(t, encoding="utf-8")
    s = convert([str(tmp_path / "txt" / "*.txt")], str(tmp_path / "t"), str(tokenizer_dir), 16)
    stream = expected_stream(tokenizer_dir, texts)
    assert s.documents == 4
    assert _flat(read_samples(str(tmp_path / "t"))) == stream[: len(stream) // 16 * 16]


def test_remote_input_through_fsspec(tmp_path: Path, tokenizer_dir: Path) -> None:
    import fsspec

    docs = documents(200)
    fs = fsspec.filesystem("memory")
    for i in range(2):
        with fs.open(f"/corpus-{id(tmp_path)}/p{i}.jsonl", "w") as f:
            f.write("".join(json.dumps({"text": d}) + "\n" for d in docs[i * 100 : (i + 1) * 100]))
    s = convert([f"memory:///corpus-{id(tmp_path)}/*.jsonl"], str(tmp_path / "o"), str(tokenizer_dir), SEQ)
    stream = expected_stream(tokenizer_dir, docs)
    assert s.documents == 200
    assert _flat(read_samples(str(tmp_path / "o"))) == stream[: len(stream) // SEQ * SEQ]


def test_narrowest_dtype_for_a_small_vocabulary(tmp_path: Path) -> None:
    import string

    from streaming import StreamingDataset
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    # A character-level tokenizer: 2 specials + ~100 characters, so ids fit in one byte.
    chars = sorted(set(string.printable) | set("Üïöé✓"))
    vocab = {EOS: 0, "<unk>": 1, **{c: i + 2 for i, c in enumerate(chars)}}
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>")),
        eos_token=EOS,
        unk_token="<unk>",
    )
    tok.save_pretrained(str(tmp_path / "chars"))
    docs = documents(50)
    convert([str(write_jsonl(tmp_path / "c.jsonl", docs))], str(tmp_path / "o"), str(tmp_path / "chars"), 32)

    side = read_sidecar(tmp_path / "o")
    assert side["dtype"] == "uint8" and side["vocab_size"] == len(vocab)
    from launcher.train.data import shared_memory_registration

    with shared_memory_registration():  # as read_samples: take turns with trainings on this host
        ds = StreamingDataset(
            remote=str(tmp_path / "o"), local=str(tmp_path / "cache"), split="train", shuffle=False, batch_size=1
        )
    assert len(ds[0]["tokens"]) == 32  # one byte per token
    text = "".join(docs)
    expected = [vocab[c] for d in docs for c in ([*list(d), EOS])]
    assert len(text) + len(docs) == len(expected)
    got = [t for i in range(len(ds)) for t in ds[i]["tokens"]]
    assert got == expected[: len(expected) // 32 * 32]

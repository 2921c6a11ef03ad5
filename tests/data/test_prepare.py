"""`launcher data prepare`: Parquet and CSV with string labels -> a tokenized DatasetDict
(train/test) with label_mapping.json beside it, ending with the data: line to paste."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import needs

needs("datasets", reason="needs the train extra")

from .conftest import cli_run

pytestmark = pytest.mark.train

ROWS = [(f"review {i}: " + ("great fun" if i % 3 else "dull and slow"), "good" if i % 3 else "bad") for i in range(60)]


def _write(path: Path, kind: str) -> Path:
    import pandas as pd

    df = pd.DataFrame({"review": [t for t, _ in ROWS], "sentiment": [lab for _, lab in ROWS], "id": range(len(ROWS))})
    if kind == "parquet":
        df.to_parquet(path)
    else:
        df.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_string_labels_become_ids_with_the_mapping_beside_the_data(
    tmp_path: Path, wordpiece_dir: Path, kind: str, capsys
) -> None:
    import datasets
    from transformers import AutoTokenizer

    src = _write(tmp_path / f"reviews.{kind}", kind)
    out = tmp_path / "prepared"
    code, stdout, err = cli_run(
        capsys,
        "data",
        "prepare",
        src,
        "--out",
        out,
        "--tokenizer",
        wordpiece_dir,
        "--text-column",
        "review",
        "--label-column",
        "sentiment",
        "--test-size",
        "0.25",
    )
    assert code == 0, err
    assert stdout.splitlines()[-2:] == ["Paste into your run spec:", f"  data: {{remote: {out}}}"]
    assert "labels      0=bad, 1=good" in stdout

    mapping = json.loads((out / "label_mapping.json").read_text())
    assert mapping == {"id2label": {"0": "bad", "1": "good"}}
    dd = datasets.load_from_disk(str(out))
    assert (len(dd["train"]), len(dd["test"])) == (45, 15)
    assert set(dd["train"].column_names) >= {"input_ids", "attention_mask", "labels"}
    assert "review" not in dd["train"].column_names and "id" not in dd["train"].column_names

    # Every example keeps its own label: decode the text back and check it against the words.
    tok = AutoTokenizer.from_pretrained(str(wordpiece_dir))
    for split in ("train", "test"):
        for ex in dd[split]:
            text = tok.decode(ex["input_ids"], skip_special_tokens=True)
            assert mapping["id2label"][str(ex["labels"])] == ("good" if "great fun" in text else "bad"), text

    code, _, err = cli_run(
        capsys,
        "data",
        "prepare",
        src,
        "--out",
        out,
        "--tokenizer",
        wordpiece_dir,
        "--text-column",
        "review",
        "--label-column",
        "sentiment",
    )
    assert code == 2 and "exists and is not empty; pass --overwrite" in err


def test_a_missing_label_column_is_one_clear_line(tmp_path: Path, wordpiece_dir: Path, capsys) -> None:
    src = _write(tmp_path / "reviews.csv", "csv")
    code, _, err = cli_run(
        capsys, "data", "prepare", src, "--out", tmp_path / "p", "--tokenizer", wordpiece_dir, "--text-column", "review"
    )
    assert code == 2 and "no label column 'label' (columns: review, sentiment, id); use --label-column" in err
    assert "Traceback" not in err


def test_prepare_to_s3_uploads_the_dataset(tmp_path: Path, wordpiece_dir: Path, s3, capsys) -> None:
    src = _write(tmp_path / "reviews.parquet", "parquet")
    code, stdout, err = cli_run(
        capsys,
        "data",
        "prepare",
        src,
        "--out",
        "s3://launcher-test/sentiment",
        "--tokenizer",
        wordpiece_dir,
        "--text-column",
        "review",
        "--label-column",
        "sentiment",
    )
    assert code == 0, err
    keys = s3.keys("sentiment/")
    assert "sentiment/dataset_dict.json" in keys and "sentiment/label_mapping.json" in keys
    assert any(k.startswith("sentiment/train/") and k.endswith(".arrow") for k in keys)
    assert stdout.rstrip().endswith("data: {remote: s3://launcher-test/sentiment}")

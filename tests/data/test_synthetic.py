"""The number-saying dataset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.data.synthetic import say, write_number_say

from .conftest import cli_run


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "zero"),
        (13, "thirteen"),
        (40, "forty"),
        (99, "ninety-nine"),
        (100, "one hundred"),
        (412, "four hundred and twelve"),
        (-412, "minus four hundred and twelve"),
        (1005, "one thousand and five"),
        (21_000, "twenty-one thousand"),
        (1_100_001, "one million one hundred thousand and one"),
        (
            -999_999_999,
            "minus nine hundred and ninety-nine million nine hundred and ninety-nine thousand nine hundred and ninety-nine",
        ),
    ],
)
def test_say(n: int, words: str) -> None:
    assert say(n) == words


def test_say_rejects_a_billion() -> None:
    with pytest.raises(ValueError):
        say(1_000_000_000)


def test_cli_writes_deterministic_jsonl(tmp_path: Path, capsys) -> None:
    code, out, err = cli_run(
        capsys, "data", "synthetic", "--kind", "number-say", "--samples", "500", "--out", tmp_path / "a.jsonl"
    )
    assert code == 0, err
    assert out.strip() == f"✔ Wrote 500 number-say documents to {tmp_path / 'a.jsonl'}"
    rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert len(rows) == 500
    assert all(r["text"] == say(r["number"]) for r in rows)
    negatives = sum(r["number"] < 0 for r in rows)
    assert 50 < negatives < 150  # about one in five, as in the seed tutorial
    assert write_number_say(tmp_path / "b.jsonl", 500) == 500
    assert (tmp_path / "b.jsonl").read_bytes() == (tmp_path / "a.jsonl").read_bytes()
    write_number_say(tmp_path / "c.jsonl", 500, seed=1)
    assert (tmp_path / "c.jsonl").read_bytes() != (tmp_path / "a.jsonl").read_bytes()


def test_cli_rejects_zero_samples(tmp_path: Path, capsys) -> None:
    code, _, err = cli_run(capsys, "data", "synthetic", "--samples", "0", "--out", tmp_path / "a.jsonl")
    assert code == 2 and "--samples" in err

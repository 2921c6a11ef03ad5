"""The Spark engine's UDF, which streaming's dataframe_to_mds calls once per pandas batch of
a partition: it must carry the remainder across batches, like the local engine."""

from __future__ import annotations

import pickle
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import needs

needs("streaming", reason="needs the train extra")
np = pytest.importorskip("numpy")

from .conftest import documents, expected_stream

pytestmark = pytest.mark.train


def test_udf_keeps_the_remainder_across_batches_and_pickles(tokenizer_dir: Path) -> None:
    import pandas as pd

    from launcher.data.spark import TokenizeConcatUDF
    from launcher.data.tokenizer import load_tokenizer

    docs = documents(300)
    udf = TokenizeConcatUDF(load_tokenizer(str(tokenizer_dir)), 48, "text", "<|endoftext|>", "")
    udf = pickle.loads(pickle.dumps(udf))  # as Spark ships it to an executor
    rows = []
    for start in range(0, 300, 70):
        rows += list(udf(pd.DataFrame({"text": docs[start : start + 70]})))
    stream = expected_stream(tokenizer_dir, docs)
    got = [t for r in rows for t in np.frombuffer(r["tokens"], "<u2").tolist()]
    assert got == stream[: len(stream) // 48 * 48]

    with pytest.raises(ValueError, match="has no 'text' value"):
        list(udf(pd.DataFrame({"text": ["a", None]})))


def test_a_task_after_another_in_the_same_worker_gets_none_of_its_tokens(tokenizer_dir: Path) -> None:
    """Spark unpickles the UDF for every task, and a reused Python worker runs one task after
    another: the second partition's samples hold its own documents' tokens only."""
    import pandas as pd

    from launcher.data.spark import TokenizeConcatUDF
    from launcher.data.tokenizer import load_tokenizer

    udf = TokenizeConcatUDF(load_tokenizer(str(tokenizer_dir)), 48, "text", "<|endoftext|>", "")
    first, second = documents(50), documents(60, start=50)
    assert len(expected_stream(tokenizer_dir, first)) % 48  # the first task leaves a remainder
    list(pickle.loads(pickle.dumps(udf))(pd.DataFrame({"text": first})))
    rows = list(pickle.loads(pickle.dumps(udf))(pd.DataFrame({"text": second})))
    stream = expected_stream(tokenizer_dir, second)
    got = [t for r in rows for t in np.frombuffer(r["tokens"], "<u2").tolist()]
    assert got == stream[: len(stream) // 48 * 48]


@pytest.mark.slow
def test_spark_engine_end_to_end(tmp_path: Path, tokenizer_dir: Path) -> None:
    """Runs when the spark extra is installed: a local Spark session, streaming's
    dataframe_to_mds with our UDF, our sidecar, read back with StreamingDataset."""
    pytest.importorskip("pyspark", reason="needs the spark extra")
    from launcher.data.convert import convert

    from .conftest import read_samples, read_sidecar, write_jsonl

    docs = documents(600)
    src = write_jsonl(tmp_path / "in.jsonl", docs)
    s = convert([str(src)], str(tmp_path / "out"), str(tokenizer_dir), 48, engine="spark", workers=2)
    stream = expected_stream(tokenizer_dir, docs)
    samples = read_samples(str(tmp_path / "out"))
    # Each of the 2 partitions drops its own last < 48 tokens, no more.
    assert len(stream) // 48 - 2 <= s.samples == len(samples) <= len(stream) // 48
    assert s.documents == 600 and read_sidecar(tmp_path / "out")["engine"] == "spark"
    left = Counter(stream)
    left.subtract(Counter(t for x in samples for t in x))
    assert min(left.values()) >= 0 and sum(left.values()) < 2 * 48  # nothing invented or duplicated
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["train"]

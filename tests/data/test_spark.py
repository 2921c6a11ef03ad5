"""The spark extra: the installed set imports together, and `--engine spark` (data convert
and data prepare) gives the same samples as the local engine. One local[1] SparkSession for
the whole test session keeps the cost bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import needs

needs("streaming", reason="needs the train extra")
needs("pyspark", reason="needs the spark extra")

from .conftest import cli_run, documents, read_samples, write_jsonl

pytestmark = [pytest.mark.train, pytest.mark.slow]


def test_the_spark_extra_imports_with_numpy_pandas_and_pyarrow() -> None:
    import numpy
    import pandas
    import pyarrow
    import pyspark
    from pyspark.sql.pandas.utils import require_minimum_pandas_version, require_minimum_pyarrow_version
    from streaming.base.converters import dataframe_to_mds  # noqa: F401

    require_minimum_pandas_version()
    require_minimum_pyarrow_version()
    assert int(pyspark.__version__.split(".")[0]) >= 4
    assert int(numpy.__version__.split(".")[0]) >= 2  # what the installed pyarrow needs
    assert pandas.__version__ and pyarrow.__version__


def test_convert_with_spark_gives_the_local_engines_samples(tmp_path: Path, tokenizer_dir: Path, spark, capsys) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", documents(400))
    for engine in ("local", "spark"):
        code, _out, err = cli_run(
            capsys,
            "data",
            "convert",
            src,
            "--out",
            tmp_path / engine,
            "--tokenizer",
            tokenizer_dir,
            "--concat-tokens",
            48,
            "--engine",
            engine,
        )
        assert code == 0, err
    local, spark_samples = read_samples(str(tmp_path / "local")), read_samples(str(tmp_path / "spark"))
    assert len(local) > 100 and spark_samples == local


def test_prepare_with_spark_gives_the_local_engines_dataset(tmp_path: Path, wordpiece_dir: Path, spark, capsys) -> None:
    import datasets

    from launcher.data.synthetic import write_sentiment

    src = write_sentiment(tmp_path / "reviews.jsonl", 120, seed=3) and tmp_path / "reviews.jsonl"
    got = {}
    for engine in ("local", "spark"):
        code, _out, err = cli_run(
            capsys,
            "data",
            "prepare",
            src,
            "--out",
            tmp_path / engine,
            "--tokenizer",
            wordpiece_dir,
            "--max-length",
            24,
            "--engine",
            engine,
        )
        assert code == 0, err
        dd = datasets.load_from_disk(str(tmp_path / engine))
        got[engine] = {split: dd[split].to_dict() for split in ("train", "test")}
        assert json.loads((tmp_path / engine / "label_mapping.json").read_text()) == {
            "id2label": {"0": "negative", "1": "positive"}
        }
    assert got["spark"] == got["local"]

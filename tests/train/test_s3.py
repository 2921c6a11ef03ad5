"""s3:// as tested as dbfs:/Volumes, against moto's S3 server on 127.0.0.1: `data convert
--out s3://`, the MPT trainer streaming its data from s3:// (streaming's S3 download) and
saving checkpoints to s3:// (Composer's object store), and the HF recipe reading a prepared
dataset from s3:// and writing its checkpoints there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.train.conftest import SEQ, losses, records, run_trainer, tiny_config, train_env

pytestmark = [pytest.mark.train, pytest.mark.slow]


def test_convert_train_and_checkpoint_on_s3(tmp_path: Path, s3, number_say) -> None:
    from launcher.data.convert import convert

    train_jsonl = number_say.mds.parent / "train.jsonl"
    summary = convert(
        [str(train_jsonl)], "s3://launcher-test/number-say", str(number_say.tokenizer), SEQ, split="train"
    )
    keys = s3.keys("number-say/train/")
    assert "number-say/train/index.json" in keys and "number-say/train/launcher_dataset.json" in keys
    assert summary.remote == "s3://launcher-test/number-say"

    cfg = tiny_config(
        tmp_path / "params.yaml",
        tokenizer=number_say.tokenizer,
        remote=None,
        max_duration="4ba",
        save_folder="s3://launcher-test/ckpt/{run_name}",
        save_interval="2ba",
        run_name="on-s3",
    )
    env = train_env(None, DATA_REMOTE="s3://launcher-test/number-say", **s3.env())
    proc = run_trainer(["-m", "launcher.train", str(cfg)], env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert sorted(losses(records(proc.stdout))) == [1, 2, 3, 4]
    ckpts = s3.keys("ckpt/on-s3/")
    assert any(k.endswith("ba2-rank0.pt") for k in ckpts) and any(k.endswith("ba4-rank0.pt") for k in ckpts), ckpts

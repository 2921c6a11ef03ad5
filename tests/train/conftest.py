"""Fixtures for the trainer's tests: learnable data (number-say text, a BPE trained on it,
converted to 64-token MDS samples), uploaded to the fake Databricks Files API, and a
config writer for a tiny MPT."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from launcher.metrics.records import parse_record

REPO = Path(__file__).resolve().parents[2]
SEQ = 64
VOCAB = 512
VOLUME = "dbfs:/Volumes/main/default/data/number-say/mds"


@dataclass(frozen=True)
class Dataset:
    mds: Path  # holds train/ and val/
    tokenizer: Path


@pytest.fixture(scope="session")
def number_say(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    """Prepared once per test session with launcher.data, as `launcher data` does it. The
    pytest-xdist workers of one session share it (their temporary directories' parent, under
    a lock): training the tokenizer and converting take about 15 s on a busy 2-core machine.
    Tests read it; what they write goes to their own directories."""
    pytest.importorskip("streaming")
    from filelock import FileLock

    from launcher.data.convert import convert
    from launcher.data.synthetic import write_number_say
    from launcher.data.tokenizer import train_tokenizer

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    root = shared / "number-say"
    dataset = Dataset(mds=root / "mds", tokenizer=root / "tokenizer")
    with FileLock(str(shared / "number-say.lock")):
        if not (root / "done").exists():
            if root.exists():  # a worker that died half-way
                shutil.rmtree(root)
            root.mkdir()
            write_number_say(root / "train.jsonl", 3000, seed=0)
            write_number_say(root / "val.jsonl", 300, seed=1)
            tok = train_tokenizer([str(root / "train.jsonl")], VOCAB, root / "tokenizer")
            assert Path(tok) == dataset.tokenizer, tok
            convert([str(root / "train.jsonl")], str(root / "mds"), str(tok), SEQ, split="train")
            convert([str(root / "val.jsonl")], str(root / "mds"), str(tok), SEQ, split="val")
            (root / "done").touch()
    return dataset


def upload_tree(fake, local: Path, remote: str) -> list[str]:
    """Upload a local directory to the fake Volume through the real SDK."""
    from databricks.sdk import WorkspaceClient

    client = WorkspaceClient(host=fake.host, token=fake.token)
    done = []
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        target = remote.removeprefix("dbfs:") + "/" + path.relative_to(local).as_posix()
        with path.open("rb") as f:
            client.files.upload(target, f, overwrite=True)
        done.append(target)
    return done


@pytest.fixture
def uc_data(databricks_files, number_say: Dataset) -> str:
    """The number-say MDS on the fake Volume; returns its dbfs:/Volumes/... root."""
    upload_tree(databricks_files, number_say.mds, VOLUME)
    return VOLUME


def tiny_config(
    path: Path,
    *,
    tokenizer: Path,
    remote: str | None,
    local: Path | None = None,
    max_duration: str = "40ba",
    batch: int = 16,
    eval_loader: bool = False,
    **extra: object,
) -> Path:
    """A tiny MPT (~0.46M parameters) config, as a user would write it; `extra` adds or
    replaces top-level keys."""

    def dataset(split: str) -> dict:
        ds: dict = {"remote": remote or "", "split": split, "shuffle": split == "train"}
        if local is not None:
            ds["local"] = f"{local}/{split}-cache"
        return ds

    cfg: dict = {
        "variables": {"seq": SEQ},
        "seed": 17,
        "model": {"d_model": 128, "n_heads": 4, "n_layers": 2, "max_seq_len": "${variables.seq}", "vocab_size": VOCAB},
        "tokenizer": str(tokenizer),
        "train_loader": {"dataset": dataset("train")},
        "optimizer": {"name": "decoupled_adamw", "lr": 3.0e-3, "weight_decay": 0.0},
        "scheduler": {"name": "cosine_with_warmup", "t_warmup": "5ba", "alpha_f": 0.1},
        "max_duration": max_duration,
        "global_train_batch_size": batch,
        "precision": "fp32",
        "log_to_console": False,
    }
    if eval_loader:
        cfg["eval_loader"] = {"dataset": dataset("val"), "drop_last": False}
    cfg.update(extra)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def train_env(fake=None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABRICKS_", "LAUNCHER_ARTIFACTS"))}
    env.update({"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"})
    for k in (
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "NODE_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
        "DATA_REMOTE",
        "DATA_LOCAL",
        "RUN_NAME",
        "COMPOSER_RUN_NAME",
    ):
        env.pop(k, None)
    if fake is not None:
        env.update(fake.env())
    env.update(extra)
    return env


def local_run_env(fake, tmp_path: Path, run: str, **extra: str) -> tuple[dict[str, str], Path]:
    """What the local backend gives a run: its name, and artifacts/ inside the run's directory."""
    run_dir = tmp_path / "runs" / run
    env = train_env(
        fake,
        RUN_NAME=run,
        LAUNCHER_BACKEND="local",
        LAUNCHER_ON_HOST="1",
        LAUNCHER_ARTIFACTS_DIR=str(run_dir / "artifacts"),
        **extra,
    )
    return env, run_dir


def shard_gets(fake) -> int:
    return sum(1 for m, p in fake.requests if m == "GET" and ".mds" in p)


def run_trainer(
    args: Sequence[str], env: dict[str, str], timeout: float = 240, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    """Run to the end; past `timeout`, its whole process group (torchrun's workers too) is killed."""
    proc = subprocess.Popen(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{' '.join(args)} ran past {timeout} s:\n{err[-3000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def records(stdout: str) -> list[dict]:
    return [r for r in map(parse_record, stdout.splitlines()) if r is not None]


def losses(recs: list[dict]) -> dict[int, float]:
    return {r["step"]: r["metrics"]["loss/train/total"] for r in recs if "loss/train/total" in r.get("metrics", {})}


@pytest.fixture
def killer() -> Iterator[list[subprocess.Popen]]:
    """Processes a test starts in their own session; any left are killed at the end."""
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

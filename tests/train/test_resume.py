"""A tiny-MPT run killed mid-way resumes from its checkpoint, and reuses the shards its
first attempt downloaded; a retry on a fresh machine resumes from the checkpoints on
dbfs:/Volumes/... (the fake Files API)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.train.conftest import (
    REPO,
    local_run_env,
    losses,
    records,
    run_trainer,
    shard_gets,
    tiny_config,
    train_env,
)

pytestmark = pytest.mark.train


def attempt(cfg: Path, env: dict[str, str], cwd: Path) -> list[dict]:
    cwd.mkdir(exist_ok=True)
    proc = run_trainer(["-m", "launcher.train", str(cfg)], env, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return records(proc.stdout)


def test_killed_run_resumes_from_its_checkpoint(
    tmp_path: Path, databricks_files, uc_data: str, number_say, killer
) -> None:
    ckpt = tmp_path / "checkpoints"
    # No dataset.local: the run's streaming cache is where the local backend puts it, in the
    # run's directory, which its retry finds again.
    cfg = tiny_config(
        tmp_path / "params.yaml",
        tokenizer=number_say.tokenizer,
        remote=uc_data,
        max_duration="40ba",
        save_folder=str(ckpt / "{run_name}"),
        save_interval="10ba",
        autoresume=True,
    )
    # The launcher keeps RUN_NAME across retries, and counts LAUNCHER_ATTEMPT.
    env, run_dir = local_run_env(databricks_files, tmp_path, "resume-me", LAUNCHER_ATTEMPT="1")

    # First attempt: killed (SIGKILL, as a lost node) once it has passed step 24.
    first = subprocess.Popen(
        [sys.executable, "-m", "launcher.train", str(cfg)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    killer.append(first)
    out1 = []
    assert first.stdout is not None
    for line in first.stdout:
        out1.append(line)
        rec = records(line)
        if rec and rec[0].get("step", 0) >= 24 and "metrics" in rec[0]:
            os.killpg(first.pid, signal.SIGKILL)
            break
    first.wait(timeout=60)
    out1 += first.stdout.readlines()
    assert first.returncode == -signal.SIGKILL, "the first attempt finished before it could be killed"
    loss1 = losses(records("".join(out1)))
    last_seen = max(loss1)
    assert 24 <= last_seen < 40
    # The newest complete checkpoint (Composer moves `latest` only after a save finishes).
    latest = os.readlink(ckpt / "resume-me" / "latest-rank0.pt")
    resume_at = int(latest.split("-ba")[1].split("-")[0])
    assert resume_at % 10 == 0 and 20 <= resume_at <= last_seen
    # A crash: no cleanup ran, and the shards it downloaded are in the run's cache.
    downloaded = shard_gets(databricks_files)
    cache = run_dir / "cache" / "streaming" / "train_loader" / "train"
    assert downloaded >= 1 and any(cache.glob("*.mds*")), "the first attempt downloaded its shards into the run's cache"

    # Second attempt: the same command, as a backend's retry runs it.
    env["LAUNCHER_ATTEMPT"] = "2"
    recs = attempt(cfg, env, REPO)
    assert shard_gets(databricks_files) == downloaded, "the retry downloaded shards it already had"
    assert recs[0]["event"] == "fit_start" and recs[0]["start_batch"] == resume_at
    loss2 = losses(recs)
    assert sorted(loss2) == list(range(resume_at + 1, 41)), "resumed at the saved batch, not at 0"
    # Continuous: the resumed steps reproduce the first attempt's losses (same weights,
    # optimizer state and data position), far below where a fresh start would be.
    for step in range(resume_at + 1, last_seen + 1):
        assert abs(loss2[step] - loss1[step]) < 0.05, (step, loss1[step], loss2[step])
    assert loss2[resume_at + 1] < loss1[1] - 2.0


@pytest.mark.slow
def test_retry_on_a_fresh_machine_resumes_from_the_volume(
    tmp_path: Path, databricks_files, uc_data: str, number_say
) -> None:
    """Checkpoints saved to dbfs:/Volumes/...; the retry runs in an empty working directory,
    as a new pod would, and continues from the Volume's latest checkpoint. (Slow: Composer
    uploads through spawned worker processes, which take a while to start on 2 cores.)"""
    folder = "dbfs:/Volumes/main/default/data/checkpoints/{run_name}"
    latest = "/Volumes/main/default/data/checkpoints/remote-resume/latest-rank0.pt.symlink"
    env = train_env(databricks_files, RUN_NAME="remote-resume")

    def cfg(duration: str) -> Path:
        return tiny_config(
            tmp_path / "params.yaml",
            tokenizer=number_say.tokenizer,
            remote=uc_data,
            local=tmp_path / "cache",
            max_duration=duration,
            save_folder=folder,
            save_interval="20ba",
            autoresume=True,
        )

    first = losses(attempt(cfg("20ba"), env, tmp_path / "node-a"))
    assert databricks_files.read(latest).decode().endswith("-ba20-rank0.pt")
    recs = attempt(cfg("30ba"), env, tmp_path / "node-b")
    assert recs[0]["start_batch"] == 20
    second = losses(recs)
    assert sorted(second) == list(range(21, 31))
    assert second[21] < first[1] - 2.0
    assert databricks_files.read(latest).decode().endswith("-ba30-rank0.pt")

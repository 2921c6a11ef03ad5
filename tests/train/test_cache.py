"""Per-run streaming caches: the same config run twice and two runs at once on one
dbfs:/Volumes remote (the fake Files API), and each streaming error as one line naming the
dataset and the fix. A retry that reuses the shards its killed first attempt downloaded:
tests/train/test_resume.py, whose killed run is that first attempt."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.train.conftest import REPO, local_run_env, losses, records, run_trainer, tiny_config

pytestmark = pytest.mark.train


def test_the_same_config_twice_and_two_runs_at_once_on_one_remote(
    tmp_path: Path, databricks_files, uc_data: str, number_say
) -> None:
    # No dataset.local: streaming's default (/tmp/<hash of remote>) would refuse the second run.
    cfg = tiny_config(
        tmp_path / "params.yaml", tokenizer=number_say.tokenizer, remote=uc_data, max_duration="4ba", eval_loader=True
    )
    # Once alone, then the same config again twice at once: three trainer starts (each pays
    # Composer's import) show both a second run after a finished one and two runs together.
    env, run_dir = local_run_env(databricks_files, tmp_path, "alone")
    proc = run_trainer(["-m", "launcher.train", str(cfg)], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(losses(records(proc.stdout))) == [1, 2, 3, 4]
    assert not (run_dir / "cache" / "streaming" / "train_loader").exists(), "a finished run's cache is removed"

    procs, run_dirs = [], []
    for run in ("both-1", "both-2"):
        env, run_dir = local_run_env(databricks_files, tmp_path, run)
        run_dirs.append(run_dir)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "launcher.train", str(cfg)],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    for p, (out, err), run_dir in zip(procs, outs, run_dirs):
        assert p.returncode == 0, err[-3000:]
        assert sorted(losses(records(out))) == [1, 2, 3, 4]
        assert not (run_dir / "cache" / "streaming" / "train_loader").exists(), "a finished run's cache is removed"


# ---------------------------------------------------------------- each streaming error
# (a missing index.json is caught before streaming runs: tests/train/test_preflight.py)


def test_a_reused_cache_names_the_dataset_and_the_fix(tmp_path: Path, number_say) -> None:
    """Another live dataset holds the cache directory (another run with the same local)."""
    from streaming import StreamingDataset

    from launcher.errors import InputError
    from launcher.train.cache import streaming_errors
    from launcher.train.preflight import DatasetInfo

    local = tmp_path / "shared-cache"
    remote = str(number_say.mds)
    holder = StreamingDataset(remote=remote, local=str(local), split="train", batch_size=1)
    info = DatasetInfo(
        remote=remote, local=str(local), split="train", dtype="uint16", seq_len=64, vocab_size=None, samples=None
    )
    with pytest.raises(InputError) as caught, streaming_errors({"eval_loader": info}):
        StreamingDataset(remote=remote, local=str(local), split="train", batch_size=1)
    assert caught.value.message == (
        f"eval_loader: the cache {local} is in use by another dataset that is still open (another run, or the other "
        "loader, with the same local): give each dataset its own eval_loader.dataset.local, or leave it empty so that "
        "each run gets its own"
    )
    del holder


def test_a_download_timeout_names_the_dataset_and_the_fix(tmp_path: Path, s3) -> None:
    """An S3 endpoint that accepts connections and never answers; streaming's own S3 download."""
    from streaming import StreamingDataset

    from launcher.errors import InputError
    from launcher.train.cache import streaming_errors
    from launcher.train.preflight import DatasetInfo

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    os.environ["S3_ENDPOINT_URL"] = f"http://127.0.0.1:{silent.getsockname()[1]}"  # restored by the s3 fixture
    remote = "s3://launcher-test/mds"
    info = DatasetInfo(
        remote=remote,
        local=str(tmp_path / "cache"),
        split="train",
        dtype="uint16",
        seq_len=64,
        vocab_size=None,
        samples=None,
    )
    try:
        started = time.monotonic()
        with pytest.raises(InputError) as caught, streaming_errors({"train_loader": info}, {"train_loader": 1.0}):
            StreamingDataset(
                remote=remote,
                local=str(tmp_path / "cache"),
                split="train",
                batch_size=1,
                download_timeout=1.0,
                download_retry=1,
            )
        assert time.monotonic() - started < 60
    finally:
        stop.set()
        thread.join()
        for c in held:
            c.close()
        silent.close()
    assert caught.value.message == (
        f"train_loader: downloading {remote}/train timed out after 1 s: raise train_loader.dataset.download_timeout "
        f"(and download_retry), or check that {remote} is reachable from here"
    )


def test_each_backend_puts_a_runs_caches_where_it_has_room() -> None:
    from launcher.train.cache import run_cache_root

    local = {
        "LAUNCHER_BACKEND": "local",
        "LAUNCHER_ON_HOST": "1",
        "LAUNCHER_ARTIFACTS_DIR": "/home/u/.launcher/runs/r-1/artifacts",
    }
    assert run_cache_root(local, "r-1") == Path("/home/u/.launcher/runs/r-1/cache/streaming")
    # In a pod: the emptyDir the Kubernetes backend mounts and names (tests/kubernetes/test_render.py).
    pod = {"LAUNCHER_BACKEND": "kubernetes", "LAUNCHER_CACHE_DIR": "/tmp/launcher-cache"}
    assert run_cache_root(pod, "r/1") == Path("/tmp/launcher-cache/r_1")
    assert run_cache_root({}, "r-1") == Path(tempfile.gettempdir()) / "launcher-streaming" / "r-1"


# ---------------------------------------------------------------- runs on one host at once


def _build_datasets_in_step(index: int, remote: str, cache: str, rounds: int, barrier, failures) -> None:
    """One of several processes (runs on one host): each round, all build a dataset at once."""
    from launcher.train.data import TokenDataset

    for _ in range(rounds):
        barrier.wait(timeout=60)
        try:
            dataset = TokenDataset(
                dtype="uint16", seq_len=64, remote=remote, local=f"{cache}/{index}", split="train", batch_size=1
            )
        except FileExistsError as err:  # streaming's prefix taken between its check and its create
            failures.put(str(err))
            dataset = None
        barrier.wait(timeout=60)
        del dataset


def test_runs_on_one_host_that_build_their_datasets_at_once_each_get_one(tmp_path: Path, number_say) -> None:
    """streaming finds a free shared-memory prefix, then creates it: without taking turns, two
    runs that start together pick the same one and one fails ('File exists: /000001_locals')."""
    import multiprocessing

    processes, rounds = 3, 6
    ctx = multiprocessing.get_context("spawn")
    barrier, failures = ctx.Barrier(processes), ctx.Queue()
    workers = [
        ctx.Process(
            target=_build_datasets_in_step,
            args=(i, str(number_say.mds), str(tmp_path / "cache"), rounds, barrier, failures),
        )
        for i in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        for worker in workers:
            worker.join(timeout=240)
        assert [w.exitcode for w in workers] == [0] * processes
        lost = []
        while not failures.empty():
            lost.append(failures.get())
        assert lost == []
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
                worker.join()


def test_a_retry_removes_the_shared_memory_its_killed_attempt_left_and_no_other(tmp_path: Path, number_say) -> None:
    """A killed attempt leaves its dataset's shared memory registered on its cache: streaming
    alone refuses the next dataset there as 'in use' (ValueError 'Reused local directory',
    after 100 retries that each keep every registered prefix open: not done here). The retry
    removes that, and only that: another run's live dataset keeps its shared memory."""
    from launcher.train.data import SHM_DIR, TokenDataset

    remote = str(number_say.mds)
    ours, theirs = tmp_path / "ours" / "train_loader", tmp_path / "theirs" / "train_loader"

    def build(cache: Path, own: tuple[Path, ...] = ()) -> TokenDataset:
        return TokenDataset(
            dtype="uint16", seq_len=64, remote=remote, local=str(cache), split="train", batch_size=1, own_caches=own
        )

    live = build(theirs)  # another run, training
    live_locals = Path(SHM_DIR, f"{live._shm_prefix_int:06}_locals")
    code = (
        "import os, signal, sys\nfrom launcher.train.data import TokenDataset\n"
        f"dataset = TokenDataset(dtype='uint16', seq_len=64, remote={remote!r}, local={str(ours)!r}, split='train', "
        "batch_size=1)\nprint('built', flush=True)\nos.killpg(0, signal.SIGKILL)\n"
    )
    # The whole process group, as a cancel or the OOM killer does: Python's resource tracker
    # (which would unlink what its process left) dies with it.
    killed = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    assert killed.returncode == -signal.SIGKILL and "built" in killed.stdout, killed.stderr[-2000:]

    retry = build(ours, own=(ours,))
    assert retry[0]["input_ids"].shape == (64,)
    assert live_locals.exists() and live[0]["input_ids"].shape == (64,), "the other run's dataset was left alone"
    assert retry._shm_prefix_int != live._shm_prefix_int
    del retry, live

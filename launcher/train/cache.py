"""Per-run streaming caches, and streaming's errors as one line each.

StreamingDataset's default `local` is `/tmp/<hash of remote>/<split>`: it refuses a
directory that exists (every rerun) and is shared by every run of the same data. So each
dataset with a remote gets its own cache, derived from the run name and the loader:

    local backend:  <run dir>/cache/streaming/<loader>/<split>   (beside artifacts/)
    a pod:          $LAUNCHER_CACHE_DIR/<run name>/<loader>/<split>   (the pod's emptyDir
                    /tmp/launcher-cache, which the Kubernetes backend mounts)
    elsewhere:      <temp dir>/launcher-streaming/<run name>/<loader>/<split>

unless the user sets `dataset.local` (or the spec's data.local). A retry of the same run
(same name) finds the shards its earlier attempt downloaded; a new run of the same spec
gets a new name and a fresh cache; two concurrent runs never share one. The caches the
launcher chose are removed when training finishes; after a failure they stay for the
retry (on the local backend they go with the run's directory, in a pod with the pod).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from launcher.errors import InputError
from launcher.pod import contract
from launcher.storage import is_remote

TMP_ROOT = "launcher-streaming"
LOADERS = ("train_loader", "eval_loader")


def run_cache_root(env: Mapping[str, str], run_name: str | None) -> Path:
    """Where this run's streaming caches live."""
    artifacts = env.get("LAUNCHER_ARTIFACTS_DIR", "").strip()
    if contract.on_host(env) and artifacts:
        return Path(artifacts).parent / "cache" / "streaming"
    name = re.sub(r"[^A-Za-z0-9._-]", "_", run_name or _unnamed_run(env))
    volume = env.get("LAUNCHER_CACHE_DIR", "").strip()
    return Path(volume) / name if volume else Path(tempfile.gettempdir()) / TMP_ROOT / name


def _unnamed_run(env: Mapping[str, str]) -> str:
    """A name every rank of one unnamed launch agrees on, and no other launch has: the
    launching process (composer/torchrun) and its rendezvous port; a lone process's pid."""
    if int(env.get("WORLD_SIZE", "1") or 1) > 1:
        return f"launch-{os.getppid()}-{env.get('MASTER_PORT', '')}"
    return f"pid-{os.getpid()}"


def assign_caches(cfg: Any, env: Mapping[str, str] | None = None) -> list[Path]:
    """Give every dataset that streams from a remote and has no `local` its own cache
    directory (set on the config). Returns the directories chosen, for `remove_caches`."""
    env = os.environ if env is None else env
    run_name = env.get("RUN_NAME") or cfg.run_name or env.get("COMPOSER_RUN_NAME")
    root = run_cache_root(env, run_name)
    chosen = []
    for loader_name in LOADERS:
        loader = getattr(cfg, loader_name, None)
        if loader is None:
            continue
        ds = loader.dataset
        if ds.local is None and is_remote(ds.remote):
            ds.local = str(root / loader_name)
            chosen.append(root / loader_name)
    return chosen


def remove_caches(dirs: list[Path]) -> None:
    """Remove the caches the launcher chose (call on one rank per node, after a barrier)."""
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    parents = {d.parent for d in dirs}
    for p in parents:
        with contextlib.suppress(OSError):
            p.rmdir()  # only when empty: the user's files are never removed


# ---------------------------------------------------------------- errors


def streaming_message(
    e: BaseException,
    *,
    name: str,
    remote: str | None,
    local: str | None,
    split: str,
    download_timeout: float | None = None,
) -> str | None:
    """The one line for an error streaming raised while `name` (train_loader, ...) was built
    or read; None when it is not one we know."""
    text = str(e)
    where = f"{remote or local}/{split}"
    if isinstance(e, FileExistsError) and "temporary local directory" in text:
        return (
            f"{name}: streaming's default cache for {where} already exists (left by an earlier run): "
            f"set {name}.dataset.local to a directory of its own, or leave it empty to get one per run"
        )
    if isinstance(e, ValueError) and "Reused local directory" in text:
        return (
            f"{name}: the cache {local} is in use by another dataset that is still open (another run, or the "
            f"other loader, with the same local): give each dataset its own {name}.dataset.local, or leave it "
            "empty so that each run gets its own"
        )
    if "index.json" in text and isinstance(e, FileNotFoundError | RuntimeError) and "took too long" not in text:
        return (
            f"{name}: {where} has no index.json: convert the data there with `launcher data convert --out "
            f"{remote or local} --split {split}`, or fix {name}.dataset.remote"
        )
    if _is_timeout(e):
        secs = f" after {download_timeout:g} s" if download_timeout else ""
        return (
            f"{name}: downloading {where} timed out{secs}: raise {name}.dataset.download_timeout "
            f"(and download_retry), or check that {remote} is reachable from here"
        )
    return None


def _is_timeout(e: BaseException) -> bool:
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        name = type(e).__name__
        if isinstance(e, TimeoutError) or "Timeout" in name or "took too long to download" in str(e):
            return True
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    return False


@contextlib.contextmanager
def streaming_errors(
    datasets: Mapping[str, Any], download_timeouts: Mapping[str, float] | None = None
) -> Iterator[None]:
    """Turn a known streaming error into an InputError naming the dataset. `datasets` maps a
    loader name to its DatasetInfo; the error is attributed to the dataset whose remote or
    local its text names, else to the first."""
    try:
        yield
    except (FileExistsError, FileNotFoundError, ValueError, RuntimeError, TimeoutError, OSError) as e:
        for name, info in _attribution(e, datasets):
            msg = streaming_message(
                e,
                name=name,
                remote=info.remote,
                local=info.local,
                split=info.split,
                download_timeout=(download_timeouts or {}).get(name),
            )
            if msg:
                raise InputError(msg) from None
            break
        raise
    except Exception as e:  # botocore's timeouts are not OSErrors
        if _is_timeout(e):
            for name, info in _attribution(e, datasets):
                msg = streaming_message(
                    e,
                    name=name,
                    remote=info.remote,
                    local=info.local,
                    split=info.split,
                    download_timeout=(download_timeouts or {}).get(name),
                )
                raise InputError(msg or str(e)) from None
        raise


def _attribution(e: BaseException, datasets: Mapping[str, Any]) -> list[tuple[str, Any]]:
    text = str(e)
    named = [(n, i) for n, i in datasets.items() if any(p and p in text for p in (i.local, i.remote))]
    return named or list(datasets.items())[:1]

"""Where a retried attempt resumes: the newest complete checkpoint in the run's checkpoint
folder (the spec's `parameters.save_folder`, as the built-in trainers and Composer name it),
given to the command as LAUNCHER_RESUME_FROM: a path for a folder on the rank's filesystem,
the object's URL for a remote one (s3://bucket/prefix/ep0-ba20-rank0.pt, or
dbfs:/Volumes/<catalog>/<schema>/<volume>/...; Composer's `load_path` takes both).

One rule for both. Complete means written whole: a non-empty file (a .pt, .pth, .ckpt or
.safetensors) or a sharded checkpoint's directory that holds its `.metadata`
(torch.distributed.checkpoint writes it last); never a symlink (Composer's `latest-rank0.pt`
points at one of the others) nor a name that says it is being written (.tmp, .partial,
.incomplete). The newest is the one with the highest batch in its name (Composer's
`ep{E}-ba{B}-rank{R}.pt`), else the last modified.

A remote folder is listed through the pod's own stores (launcher.entrypoint.archive_stores,
the log archive's, with the same credentials from the environment): S3's ListObjectsV2, the
Files API's directory listing. There an object listed is whole: S3 makes an object visible
only once its PutObject or CompleteMultipartUpload succeeded (each is atomic: a reader sees
the whole new object or none), and a Volume's file is made by the Files API's upload from
the request's whole body ("the contents of the resulting file will be exactly the bytes
sent"), so a crash mid-upload leaves no file of that name, only an upload that never
completed. The time is bounded: at most LIST_PAGES pages and DIRECTORY_CHECKS `.metadata`
look-ups, each request with a REQUEST_SECONDS timeout, and the first failure ends the look
(the log says why; the attempt goes on without the variable).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Iterable

from launcher.entrypoint import log as out
from launcher.entrypoint.archive_stores import Listed

RESUME_FROM = "LAUNCHER_RESUME_FROM"
SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors")
WRITING = (".tmp", ".partial", ".incomplete")
BATCH = re.compile(r"(?:^|[-_])ba(\d+)")
LIST_PAGES = 10
"""Pages of a remote folder's listing looked at (1000 entries a page on S3 and a Volume)."""
DIRECTORY_CHECKS = 5
"""Sharded checkpoints' directories looked into for `.metadata`, newest first."""
REQUEST_SECONDS = 10.0


def is_remote(folder: str) -> bool:
    return ("://" in folder and not folder.startswith("file://")) or folder.startswith("dbfs:")


def folder_of(template: str, env: dict[str, str], workdir: Path) -> str:
    """save_folder with {run_name} filled in; a local one relative to the working directory."""
    folder = template.replace("{run_name}", env.get("RUN_NAME", ""))
    if is_remote(folder):
        return folder.rstrip("/")
    path = Path(folder[len("file://") :] if folder.startswith("file://") else folder)
    return str(path if path.is_absolute() else workdir / path)


def _may_be_complete(e: Listed) -> bool:
    """Complete as far as its listing tells (a directory still needs its `.metadata`)."""
    if e.is_link or e.name.endswith(WRITING):
        return False
    return e.is_dir or (e.name.endswith(SUFFIXES) and e.size > 0)


def _batch(name: str) -> int | None:
    m = BATCH.search(name)
    return int(m.group(1)) if m else None


def newest_complete(entries: Iterable[Listed], has_metadata: Callable[[str], bool]) -> tuple[str, int | None] | None:
    """The name of the newest complete checkpoint among a folder's `entries` and its batch
    (None where its name has none); None without one. `has_metadata(name)`: whether the
    directory `name` holds its `.metadata`."""
    checked = 0

    def key(e: Listed) -> tuple[int, float]:
        batch = _batch(e.name)
        return (-1 if batch is None else batch, e.mtime)

    for e in sorted((e for e in entries if _may_be_complete(e)), key=key, reverse=True):
        if e.is_dir:
            if checked >= DIRECTORY_CHECKS:
                continue
            checked += 1
            if not has_metadata(e.name):
                continue
        return e.name, _batch(e.name)
    return None


def _local_entries(folder: str) -> list[Listed]:
    found = []
    for e in os.scandir(folder):
        if e.is_symlink():
            found.append(Listed(e.name, False, 0, 0.0, is_link=True))
            continue
        st = e.stat()
        found.append(Listed(e.name, e.is_dir(), st.st_size, st.st_mtime))
    return found


def newest_in(folder: str, env: dict[str, str]) -> tuple[str, int | None] | None:
    """The newest complete checkpoint in `folder` (a path or a store's URL), as a path or
    URL, and its batch; None without one. ArchiveStoreError where a remote folder cannot be
    listed; a local one that cannot be read has none."""
    if not is_remote(folder):
        try:
            entries = _local_entries(folder)
        except OSError:
            return None
        found = newest_complete(entries, lambda name: os.path.isfile(os.path.join(folder, name, ".metadata")))
        return (os.path.join(folder, found[0]), found[1]) if found else None

    from launcher.entrypoint.archive_stores import open_pod_store

    store = open_pod_store(folder, env)
    store.timeout = REQUEST_SECONDS
    found = newest_complete(store.entries("", max_pages=LIST_PAGES), lambda name: store.exists(f"{name}/.metadata"))
    return (f"{store.url}/{found[0]}", found[1]) if found else None


def resume(env: dict[str, str], folder_template: str | None, attempt: int, workdir: Path) -> dict | None:
    """On a retried attempt, set RESUME_FROM to the newest complete checkpoint; what was
    chosen ({"path", "step"}) for the exit file and the termination message, or None."""
    if attempt <= 1 or not folder_template:
        return None
    from launcher.entrypoint.archive_stores import ArchiveStoreError

    folder = folder_of(folder_template, env, workdir)
    try:
        found = newest_in(folder, env)
    except ArchiveStoreError as e:  # its text is one line, without a secret
        out.log(f"resume: attempt {attempt}: cannot look in {folder}: {e}; {RESUME_FROM} is not set")
        return None
    except (ValueError, KeyError, SyntaxError) as e:  # a listing that is not S3's XML or the Files API's JSON
        why = f"its listing is not what the store should answer ({type(e).__name__})"
        out.log(f"resume: attempt {attempt}: cannot look in {folder}: {why}; {RESUME_FROM} is not set")
        return None
    if found is None:
        out.log(f"resume: attempt {attempt}: no complete checkpoint in {folder}; {RESUME_FROM} is not set")
        return None
    path, step = found
    env[RESUME_FROM] = path
    at = f" (step {step})" if step is not None else ""
    out.log(f"resume: attempt {attempt} resumes from {path}{at} ({RESUME_FROM})")
    return {"path": path, "step": step}

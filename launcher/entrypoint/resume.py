"""Where a retried attempt resumes: the newest complete checkpoint in the run's checkpoint
folder (the spec's `parameters.save_folder` where it is a path on the rank's filesystem, as
the built-in trainers and Composer name it), given to the command as LAUNCHER_RESUME_FROM.

Complete means written whole: a regular non-empty file (a .pt, .pth, .ckpt or .safetensors)
or a sharded checkpoint's directory that holds its `.metadata` (torch.distributed.checkpoint
writes it last); never a symlink (Composer's `latest-rank0.pt` points at one of the others)
nor a name that says it is being written (.tmp, .partial, .incomplete). The newest is the
one with the highest batch in its name (Composer's `ep{E}-ba{B}-rank{R}.pt`), else the last
modified. Remote folders (s3://, dbfs:/) are not looked in: the trainers' own autoresume
reads those.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from launcher.entrypoint import log as out

RESUME_FROM = "LAUNCHER_RESUME_FROM"
SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors")
WRITING = (".tmp", ".partial", ".incomplete")
BATCH = re.compile(r"(?:^|[-_])ba(\d+)")


def folder_of(template: str, env: dict[str, str], workdir: Path) -> Path:
    """save_folder with {run_name} filled in, relative to the working directory."""
    path = Path(template.replace("{run_name}", env.get("RUN_NAME", "")))
    return path if path.is_absolute() else workdir / path


def _complete(entry: os.DirEntry) -> bool:
    if entry.is_symlink() or entry.name.endswith(WRITING):
        return False
    if entry.is_dir():
        return os.path.isfile(os.path.join(entry.path, ".metadata"))
    return entry.name.endswith(SUFFIXES) and entry.stat().st_size > 0


def newest_complete(folder: Path) -> tuple[Path, int | None] | None:
    """The newest complete checkpoint in `folder` and its batch (None where its name has
    none); None without one."""
    try:
        entries = [e for e in os.scandir(folder) if _complete(e)]
    except OSError:
        return None
    if not entries:
        return None

    def key(e: os.DirEntry) -> tuple[int, float]:
        m = BATCH.search(e.name)
        return (int(m.group(1)) if m else -1, e.stat().st_mtime)

    best = max(entries, key=key)
    m = BATCH.search(best.name)
    return Path(best.path), int(m.group(1)) if m else None


def resume(env: dict[str, str], folder_template: str | None, attempt: int, workdir: Path) -> dict | None:
    """On a retried attempt, set RESUME_FROM to the newest complete checkpoint; what was
    chosen ({"path", "step"}) for the exit file, or None."""
    if attempt <= 1 or not folder_template:
        return None
    folder = folder_of(folder_template, env, workdir)
    found = newest_complete(folder)
    if found is None:
        out.log(f"resume: attempt {attempt}: no complete checkpoint in {folder}; {RESUME_FROM} is not set")
        return None
    path, step = found
    env[RESUME_FROM] = str(path)
    at = f" (step {step})" if step is not None else ""
    out.log(f"resume: attempt {attempt} resumes from {path}{at} ({RESUME_FROM})")
    return {"path": str(path), "step": step}

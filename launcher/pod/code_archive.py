"""A code snapshot: the files of a working tree as one deterministic .tar.gz.

The host packs it (launcher.sdk.code_selection picks the files); every rank's entrypoint
unpacks it into its working directory after checking its digest against the plan. Both
sides use this module, so it needs the standard library alone (Python 3.8 or newer).

Deterministic: the same files with the same contents and executable bits give the same
bytes, so the digest names the tree. Entries are sorted by path, every mtime is 0, owner
and group are 0 with no names, modes are 0644 (0755 for an executable file), and the gzip
header has mtime 0 and no file name.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

ARCHIVE_NAME = "code.tar.gz"
DIGEST_PREFIX = "sha256:"
DEFAULT_LIMIT = 200 * 1024 * 1024  # the local backend's: a snapshot is a copy in the run's directory


@dataclass(frozen=True)
class Snapshot:
    """A packed working tree: its bytes, their digest and what went in."""

    data: bytes = field(repr=False)
    digest: str
    root: str
    files: int
    unpacked: int
    """Bytes of the files packed."""
    notes: tuple[str, ...] = ()
    listing: tuple[tuple[str, int], ...] = field(default=(), repr=False)
    """(path, size) of every file packed, by path: what `run --code-dry-run` lists."""

    @property
    def size(self) -> int:
        return len(self.data)

    def record(self) -> dict[str, Any]:
        """What the run's record keeps of it (describe shows it)."""
        return {"digest": self.digest, "size": self.size, "files": self.files, "path": self.root}


class SnapshotError(ValueError):
    """The snapshot does not match its digest, or holds an entry it must not."""


def digest_of(data: bytes) -> str:
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def pack(root: Path, files: list[str]) -> bytes:
    """The .tar.gz of `files` (paths relative to `root`, '/'-separated), in sorted order."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(set(files)):
            path = root / rel
            info = tarfile.TarInfo(rel)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            st = path.lstat()
            if os.path.islink(path):
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(path)
                info.mode = 0o777
                tar.addfile(info)
                continue
            info.size = st.st_size
            info.mode = 0o755 if st.st_mode & 0o100 else 0o644
            with open(path, "rb") as f:
                tar.addfile(info, f)
    out = io.BytesIO()
    # mtime=0 and no file name in the header: the bytes depend on the contents alone.
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def _safe_name(name: str) -> bool:
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts


def unpack(data: bytes, target: Path, digest: str) -> int:
    """Check `data` against `digest`, then lay its files over `target` (files already there
    are replaced); return how many files it held. SnapshotError on a mismatch or an entry
    that would land outside `target`."""
    actual = digest_of(data)
    if actual != digest:
        raise SnapshotError(f"the code snapshot's digest is {actual}; the plan says {digest}")
    target.mkdir(parents=True, exist_ok=True)
    inside = os.path.realpath(target)
    count = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar:
            if not _safe_name(member.name) or not (member.isfile() or member.issym()):
                raise SnapshotError(f"the code snapshot holds an entry it must not: {member.name!r}")
            dest = target / member.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            parent = os.path.realpath(dest.parent)
            if parent != inside and not parent.startswith(inside + os.sep):  # through a packed symlink
                raise SnapshotError(f"the code snapshot's entry {member.name!r} lands outside {target}")
            if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
                dest.unlink()
            if member.issym():
                os.symlink(member.linkname, dest)
            else:
                src = tar.extractfile(member)
                assert src is not None
                with open(dest, "wb") as f:
                    f.write(src.read())
                os.chmod(dest, member.mode & 0o755)
            count += 1
    return count

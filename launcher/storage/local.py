"""Local paths (and file:// URLs): the filesystem of this machine."""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path
from typing import BinaryIO

from launcher.storage.base import Store
from launcher.storage.boundary import Service

SERVICE = Service("the local filesystem")


class LocalStore(Store):
    """`url` is kept as given (a relative path stays relative in messages); '' is the
    current directory."""

    def __init__(self, path: str):
        self.url = os.path.expanduser(path).rstrip("/") or ("/" if path.startswith("/") else "")
        self.service = SERVICE

    def url_of(self, rel: str = "") -> str:
        rel = rel.strip("/")
        if not rel:
            return self.url or "."
        return os.path.join(self.url, rel) if self.url else rel

    def _path(self, rel: str) -> Path:
        return Path(self.url_of(rel))

    def local_path(self) -> Path:
        return Path(self.url or ".")

    def describe(self, rel: str = "") -> str:
        return str(self._path(rel).resolve())

    def exists(self, rel: str = "") -> bool:
        return self._path(rel).exists()

    def isdir(self, rel: str = "") -> bool:
        return self._path(rel).is_dir()

    def size(self, rel: str = "") -> int:
        with self._call("reading", rel):
            return self._path(rel).stat().st_size

    def read(self, rel: str = "") -> bytes:
        with self._call("reading", rel):
            try:
                return self._path(rel).read_bytes()
            except (NotADirectoryError, IsADirectoryError) as e:
                raise FileNotFoundError(str(e)) from None  # not a file there: missing, for a reader

    def open(self, rel: str = "") -> BinaryIO:
        with self._call("reading", rel):
            return open(self._path(rel), "rb")

    def files(self, sub: str = "") -> list[str]:
        root = self.local_path()
        base = root / sub if sub else root
        if not base.is_dir():
            return []
        return sorted(p.relative_to(root).as_posix() for p in base.rglob("*") if p.is_file())

    def glob(self, pattern: str) -> list[str]:
        # glob.glob's own rules for a local path: files and directories, ** with recursive.
        return sorted(glob.glob(pattern, root_dir=self.url or None, recursive=True))

    def download(self, rel: str, dest: Path) -> None:
        with self._call("copying", rel):
            shutil.copyfile(self._path(rel), dest)

    def upload(self, local: Path, rel: str) -> None:
        with self._call("writing", rel):
            target = self._path(rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(local, target)

    def write(self, rel: str, data: bytes) -> None:
        with self._call("writing", rel):
            target = self._path(rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)  # a reader sees the whole file or none

    def delete(self, rel: str) -> None:
        with self._call("deleting", rel):
            self._path(rel).unlink()

    def remove_dir(self, rel: str) -> None:
        with self._call("deleting", rel):
            self._path(rel).rmdir()

"""Every other URL scheme through fsspec (memory://, https://, hf://, ...): its backend
must be installed, and reads its own credentials."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from launcher.errors import InputError
from launcher.storage.base import Store
from launcher.storage.boundary import Service, first_line


class FsspecStore(Store):
    def __init__(self, url: str):
        import fsspec

        self.url = url.rstrip("/")
        scheme = url.split("://", 1)[0]
        try:
            self.fs, self.root = fsspec.core.url_to_fs(self.url)
        except ImportError as e:  # fsspec names the package to install
            raise InputError(f"{url}: {first_line(e)}") from None
        except ValueError as e:  # a protocol fsspec does not know
            raise InputError(f"{url}: cannot open it: {first_line(e)}") from None
        self.root = self.root.rstrip("/")
        self.service = Service(f"{scheme}:// storage", address=f"{scheme}:// storage")

    def _path(self, rel: str) -> str:
        rel = rel.strip("/")
        return f"{self.root}/{rel}" if rel else self.root

    def _rel(self, path: str) -> str:
        return path[len(self.root) :].strip("/") if path.startswith(self.root) else path

    def exists(self, rel: str = "") -> bool:
        with self._call("checking", rel):
            return bool(self.fs.exists(self._path(rel)))

    def isdir(self, rel: str = "") -> bool:
        with self._call("checking", rel):
            return bool(self.fs.isdir(self._path(rel)))

    def size(self, rel: str = "") -> int:
        with self._call("reading", rel):
            return int(self.fs.size(self._path(rel)) or 0)

    def read(self, rel: str = "") -> bytes:
        with self._call("reading", rel):
            return self.fs.cat_file(self._path(rel))

    def open(self, rel: str = "") -> BinaryIO:
        with self._call("reading", rel):
            return self.fs.open(self._path(rel), "rb")

    def files(self, sub: str = "") -> list[str]:
        with self._call("listing", sub):
            if not self.fs.isdir(self._path(sub)):
                return []
            return sorted(self._rel(p) for p in self.fs.find(self._path(sub)))

    def glob(self, pattern: str) -> list[str]:
        with self._call("listing", pattern):
            return sorted(self._rel(p) for p in self.fs.glob(self._path(pattern)))

    def download(self, rel: str, dest: Path) -> None:
        with self._call("downloading", rel):
            self.fs.get_file(self._path(rel), str(dest))

    def upload(self, local: Path, rel: str) -> None:
        with self._call("uploading", rel):
            parent = self._path(rel).rsplit("/", 1)[0]
            if parent:
                self.fs.makedirs(parent, exist_ok=True)
            self.fs.put_file(str(local), self._path(rel))

    def write(self, rel: str, data: bytes) -> None:
        with self._call("uploading", rel):
            parent = self._path(rel).rsplit("/", 1)[0]
            if parent:
                self.fs.makedirs(parent, exist_ok=True)
            self.fs.pipe_file(self._path(rel), data)

    def delete(self, rel: str) -> None:
        with self._call("deleting", rel):
            self.fs.rm_file(self._path(rel))

    def remove_dir(self, rel: str) -> None:
        with self._call("deleting", rel):
            self.fs.rmdir(self._path(rel))

"""gs:// and oci:// through mosaicml-streaming's own downloaders and uploaders, so that
the launcher reads and writes them with the credentials the trainer's StreamingDataset
uses (GOOGLE_APPLICATION_CREDENTIALS or GCS_KEY/GCS_SECRET; ~/.oci/config). Streaming has
no delete: a store here cannot remove what it wrote."""

from __future__ import annotations

import shutil
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any, BinaryIO

from launcher.errors import InputError
from launcher.storage.base import Patience, Store
from launcher.storage.boundary import Service, StorageAccessError, StorageError, first_line

SCHEMES = ("gs", "oci")


class StreamingStore(Store):
    def __init__(self, url: str, patience: Patience, what: str):
        try:
            import streaming.base.storage  # noqa: F401
        except ImportError:
            raise InputError(
                f"{what} needs the train extra (mosaicml-streaming): pip install 'launcher[train]'"
            ) from None
        parsed = urllib.parse.urlparse(url)
        self.url = url.rstrip("/")
        self.scheme = parsed.scheme
        self.prefix = parsed.path.strip("/")
        self.what = what
        self.timeout = patience.http_s
        self.service = Service(f"{self.scheme}://{parsed.netloc}", catch_all=True)
        self._uploader: Any = None
        self._staging = ""

    def uploader(self) -> Any:
        """Streaming's uploader for the store (built once: building it checks the bucket)."""
        if self._uploader is None:
            from streaming.base.storage.upload import CloudUploader

            self._staging = tempfile.mkdtemp(prefix="launcher-store-")
            with self._call("opening"):
                try:
                    self._uploader = CloudUploader.get((self._staging, self.url), keep_local=True, exist_ok=True)
                except ValueError as e:  # streaming's words for missing credentials
                    raise StorageAccessError(f"{self.what}: {first_line(e)}") from None
        return self._uploader

    def _key(self, rel: str) -> str:
        return "/".join(p for p in (self.prefix, rel.strip("/")) if p)

    def exists(self, rel: str = "") -> bool:
        key = self._key(rel)
        return any(k == key or k.startswith(key + "/") or not key for k in self._keys(rel))

    def isdir(self, rel: str = "") -> bool:
        key = self._key(rel)
        return any(k.startswith(key + "/") or not key for k in self._keys(rel))

    def _keys(self, rel: str) -> list[str]:
        uploader = self.uploader()
        with self._call("listing", rel):
            return list(uploader.list_objects(rel.strip("/")) or [])

    def size(self, rel: str = "") -> int:
        raise StorageError(f"the size of {self.url_of(rel)} is not known: streaming does not say")

    def download(self, rel: str, dest: Path) -> None:
        from streaming.base.storage import CloudDownloader

        with self._call("downloading", rel):
            CloudDownloader.direct_download(self.url_of(rel), str(dest), self.timeout)

    def read(self, rel: str = "") -> bytes:
        with tempfile.TemporaryDirectory(prefix="launcher-read-") as tmp:
            dest = Path(tmp) / "file"
            self.download(rel, dest)
            return dest.read_bytes()

    def open(self, rel: str = "") -> BinaryIO:
        with tempfile.TemporaryDirectory(prefix="launcher-read-") as tmp:
            dest = Path(tmp) / "file"
            self.download(rel, dest)
            with dest.open("rb") as src:
                return self._spooled(lambda f: shutil.copyfileobj(src, f, 1 << 20))

    def files(self, sub: str = "") -> list[str]:
        base = self._key(sub)
        skip = len(self.prefix) + 1 if self.prefix else 0
        return sorted(k[skip:] for k in self._keys(sub) if not base or k == base or k.startswith(base + "/"))

    def upload(self, local: Path, rel: str) -> None:
        uploader = self.uploader()
        staged = Path(self._staging, rel)
        staged.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, staged)
        try:
            with self._call("uploading", rel):
                uploader.upload_file(rel.strip("/"))
        finally:
            staged.unlink(missing_ok=True)

    def delete(self, rel: str) -> None:
        raise StorageError(f"cannot delete {self.url_of(rel)}: mosaicml-streaming has no delete for {self.scheme}://")

    def check(self) -> None:
        self.uploader()

    def __del__(self) -> None:
        if self._staging:
            shutil.rmtree(self._staging, ignore_errors=True)

"""A stateful fake of a Databricks workspace on 127.0.0.1: its Files API (Unity Catalog
Volumes) and, at `.mlflow`, its MLflow tracking server (tests/fakes/databricks_mlflow.py).

It speaks the endpoints the real databricks-sdk (and through it, streaming and mlflow) uses:

    GET|HEAD|PUT|DELETE /api/2.0/fs/files/Volumes/<catalog>/<schema>/<volume>/...
    GET|HEAD|PUT|DELETE /api/2.0/fs/directories/Volumes/...
    GET|POST            /api/2.0/mlflow/...  (see databricks_mlflow.py)

with bearer-token auth and Databricks JSON errors {"error_code", "message"}. Files live in
memory; a file upload creates its parent directories, as on a real Volume; paths outside an
existing Volume are NOT_FOUND. Tests point DATABRICKS_HOST / DATABRICKS_TOKEN at it (see
`env()`), inspect `files` / `read()` / `listdir()`, read the `requests` log (Files calls;
MLflow calls are in `mlflow.requests`) and the `unknown` log (any endpoint the fake does not
speak, answered 404 ENDPOINT_NOT_FOUND), and inject failures with `fail()`.
"""

from __future__ import annotations

import fnmatch
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from tests.fakes.http import LoopbackServer

FILES = "/api/2.0/fs/files"
DIRS = "/api/2.0/fs/directories"
MLFLOW = "/api/2.0/mlflow"
PAGE_SIZE = 1000


def now_ms() -> int:
    """Now, as the Databricks APIs give times: milliseconds since the epoch."""
    return int(time.time() * 1000)


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class Fault:
    """Answer requests matching method and path glob with an error, `times` times (None: always)."""

    method: str
    pattern: str
    status: int
    code: str
    message: str
    times: int | None = None


@dataclass
class _Entry:
    data: bytes
    mtime: float = field(default_factory=time.time)


class FakeDatabricksFiles:
    def __init__(self, token: str = "dapi-fake-0123456789abcdef"):
        self.token = token
        self.files: dict[str, _Entry] = {}
        self.dirs: set[str] = set()
        self.volumes: set[str] = set()
        self.requests: list[tuple[str, str]] = []  # (method, path) in arrival order
        self.unknown: list[tuple[str, str]] = []  # (method, URL path) answered ENDPOINT_NOT_FOUND
        self.faults: list[Fault] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        from tests.fakes.databricks_mlflow import FakeMlflowTracking  # here: it imports this module

        self.mlflow = FakeMlflowTracking(self.lock)

    # ---- test-facing API ---------------------------------------------------------------
    @property
    def host(self) -> str:
        assert self._server is not None, "start() the fake first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def env(self, token: str | None = None) -> dict[str, str]:
        """Environment for the real SDK: this host and (by default) the valid token."""
        return {"DATABRICKS_HOST": self.host, "DATABRICKS_TOKEN": token or self.token}

    def create_volume(self, catalog: str, schema: str, volume: str) -> str:
        root = f"/Volumes/{catalog}/{schema}/{volume}"
        with self.lock:
            self.volumes.add(root)
            self.dirs.add(root)
        return root

    def read(self, path: str) -> bytes:
        """A stored file, by Files-API path (/Volumes/...) or dbfs:/Volumes/... URL."""
        with self.lock:
            return self.files[_strip(path)].data

    def write(self, path: str, data: bytes) -> None:
        """Store a file as an upload would (its parent directories made), without a request."""
        with self.lock:
            p = _strip(path)
            self._mkdirs(p.rsplit("/", 1)[0])
            self.files[p] = _Entry(data)

    def exists(self, path: str) -> bool:
        with self.lock:
            p = _strip(path)
            return p in self.files or p in self.dirs

    def paths(self, prefix: str = "/") -> list[str]:
        """Every stored file under prefix, sorted."""
        p = _strip(prefix).rstrip("/") + "/"
        with self.lock:
            return sorted(f for f in self.files if f.startswith(p))

    def listdir(self, path: str) -> list[str]:
        with self.lock:
            return [e["name"] for e in self._children(_strip(path))]

    def fail(
        self,
        method: str,
        pattern: str,
        status: int = 500,
        code: str = "INTERNAL_ERROR",
        message: str = "injected failure",
        times: int | None = None,
    ) -> Fault:
        """Make matching requests fail; pattern is an fnmatch glob over the /Volumes/... path
        (or the /api/2.0/mlflow/... endpoint)."""
        fault = Fault(method.upper(), pattern, status, code, message, times)
        with self.lock:
            self.faults.append(fault)
        return fault

    # ---- lifecycle ---------------------------------------------------------------------
    def start(self) -> FakeDatabricksFiles:
        fake = self

        class Handler(_Handler):
            state = fake

        self._server = LoopbackServer(Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-databricks", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # ---- the API's semantics (called with the lock held) -------------------------------
    def _volume_of(self, path: str) -> str:
        parts = path.split("/")
        if len(parts) < 5 or parts[1] != "Volumes":
            raise ApiError(
                400, "INVALID_PARAMETER_VALUE", f"Path must be under /Volumes/<catalog>/<schema>/<volume>: {path}"
            )
        root = "/".join(parts[:5])
        if root not in self.volumes:
            raise ApiError(404, "NOT_FOUND", f"Volume '{'.'.join(parts[2:5])}' does not exist.")
        return root

    def _mkdirs(self, path: str) -> None:
        root = self._volume_of(path)
        while path != root and path not in self.dirs:
            if path in self.files:
                raise ApiError(409, "ALREADY_EXISTS", f"A file exists at {path}")
            self.dirs.add(path)
            path = path.rsplit("/", 1)[0]

    def _children(self, path: str) -> list[dict]:
        prefix = path.rstrip("/") + "/"
        out = []
        for d in self.dirs:
            if d.startswith(prefix) and "/" not in d[len(prefix) :]:
                out.append({"path": d + "/", "name": d[len(prefix) :], "is_directory": True})
        for f, entry in self.files.items():
            if f.startswith(prefix) and "/" not in f[len(prefix) :]:
                out.append(
                    {
                        "path": f,
                        "name": f[len(prefix) :],
                        "is_directory": False,
                        "file_size": len(entry.data),
                        "last_modified": int(entry.mtime * 1000),
                    }
                )
        return sorted(out, key=lambda e: e["name"])

    def _check_fault(self, method: str, path: str) -> None:
        for fault in self.faults:
            if fault.method == method and fnmatch.fnmatch(path, fault.pattern) and fault.times != 0:
                if fault.times is not None:
                    fault.times -= 1
                raise ApiError(fault.status, fault.code, fault.message)


def _strip(path: str) -> str:
    return path[len("dbfs:") :] if path.startswith("dbfs:") else path


class _Handler(BaseHTTPRequestHandler):
    state: FakeDatabricksFiles
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:
        pass

    # ---- plumbing ----------------------------------------------------------------------
    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: dict) -> None:
        self._send(status, json.dumps(obj).encode(), {"Content-Type": "application/json"})

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self._body() if self.command in ("PUT", "POST") else b""
        state = self.state
        try:
            if self.headers.get("Authorization", "") != f"Bearer {state.token}":
                raise ApiError(401, "UNAUTHENTICATED", "Invalid access token.")
            if url.path.startswith(MLFLOW + "/") and self.command in ("GET", "POST"):
                self._mlflow(url.path, query, body)
                return
            if url.path.startswith(FILES + "/"):
                kind, path = "files", unquote(url.path[len(FILES) :])
            elif url.path.startswith(DIRS + "/"):
                kind, path = "dirs", unquote(url.path[len(DIRS) :])
            else:
                raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{self.command} {url.path}'")
            path = "/" + path.strip("/")
            with state.lock:
                state.requests.append((self.command, path))
                state._check_fault(self.command, path)
                handler = getattr(self, f"_{kind}_{self.command.lower()}", None)
                if handler is None:
                    raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{self.command} {url.path}'")
                handler(path, query, body)
        except ApiError as e:
            if e.code == "ENDPOINT_NOT_FOUND":
                with state.lock:
                    state.unknown.append((self.command, url.path))
            self._json(e.status, {"error_code": e.code, "message": e.message})

    do_GET = do_HEAD = do_PUT = do_DELETE = do_POST = _dispatch

    # ---- /mlflow -----------------------------------------------------------------------
    def _mlflow(self, path: str, query: dict, body: bytes) -> None:
        if self.command == "POST":
            try:
                args = json.loads(body or b"{}")
            except ValueError:
                raise ApiError(400, "MALFORMED_REQUEST", "Request body is not valid JSON.") from None
            if not isinstance(args, dict):
                raise ApiError(400, "MALFORMED_REQUEST", "Request body must be a JSON object.")
        else:
            args = query
        with self.state.lock:
            self.state.mlflow.requests.append((self.command, path[len(MLFLOW) :], args))
            self.state._check_fault(self.command, path)
            answer = self.state.mlflow.handle(self.command, path[len(MLFLOW) :], args)
        self._json(200, answer)

    # ---- /fs/files ---------------------------------------------------------------------
    def _file(self, path: str) -> _Entry:
        self.state._volume_of(path)
        entry = self.state.files.get(path)
        if entry is None:
            raise ApiError(404, "NOT_FOUND", f"The file being accessed is not found: {path}")
        return entry

    def _file_headers(self, entry: _Entry, length: int) -> dict[str, str]:
        return {
            "Content-Type": "application/octet-stream",
            "Content-Length": str(length),
            "Last-Modified": formatdate(entry.mtime, usegmt=True),
            "Accept-Ranges": "bytes",
        }

    def _files_get(self, path: str, query: dict, body: bytes) -> None:
        entry = self._file(path)
        data, status = entry.data, 200
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes="):
            start_s, _, end_s = rng[len("bytes=") :].partition("-")
            start = int(start_s or 0)
            end = int(end_s) if end_s else len(data) - 1
            data, status = data[start : end + 1], 206
        self._send(status, data, self._file_headers(entry, len(data)))

    def _files_head(self, path: str, query: dict, body: bytes) -> None:
        entry = self._file(path)
        self._send(200, b"", self._file_headers(entry, len(entry.data)))

    def _files_put(self, path: str, query: dict, body: bytes) -> None:
        state = self.state
        state._volume_of(path)
        if path in state.dirs:
            raise ApiError(409, "ALREADY_EXISTS", f"A directory exists at {path}")
        if path in state.files and query.get("overwrite", "true").lower() == "false":
            raise ApiError(409, "ALREADY_EXISTS", f"The file being created already exists: {path}")
        state._mkdirs(path.rsplit("/", 1)[0])
        state.files[path] = _Entry(body)
        self._send(204)

    def _files_delete(self, path: str, query: dict, body: bytes) -> None:
        self._file(path)
        del self.state.files[path]
        self._send(204)

    # ---- /fs/directories ---------------------------------------------------------------
    def _dir(self, path: str) -> None:
        self.state._volume_of(path)
        if path not in self.state.dirs:
            raise ApiError(404, "NOT_FOUND", f"The directory being accessed is not found: {path}")

    def _dirs_head(self, path: str, query: dict, body: bytes) -> None:
        self._dir(path)
        self._send(200)

    def _dirs_get(self, path: str, query: dict, body: bytes) -> None:
        self._dir(path)
        entries = self.state._children(path)
        size = min(int(query.get("page_size") or PAGE_SIZE), PAGE_SIZE)
        start = int(query.get("page_token") or 0)
        page = {"contents": entries[start : start + size]}
        if start + size < len(entries):
            page["next_page_token"] = str(start + size)
        self._json(200, page)

    def _dirs_put(self, path: str, query: dict, body: bytes) -> None:
        self.state._mkdirs(path)
        self._send(204)

    def _dirs_delete(self, path: str, query: dict, body: bytes) -> None:
        self._dir(path)
        if path in self.state.volumes:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "Cannot delete the root directory of a Volume.")
        if self.state._children(path):
            raise ApiError(409, "DIRECTORY_NOT_EMPTY", f"Directory is not empty: {path}")
        self.state.dirs.discard(path)
        self._send(204)


@pytest.fixture
def databricks_files() -> Iterator[FakeDatabricksFiles]:
    """A running fake Files API with one Volume, /Volumes/main/default/data."""
    fake = FakeDatabricksFiles().start()
    fake.create_volume("main", "default", "data")
    try:
        yield fake
    finally:
        fake.stop()

"""Where a pod writes its log archive, with the standard library alone: the entrypoint runs
in the image's own python3 -I -S (the zipapp mode), where neither boto3 nor databricks-sdk
can be had, and every entrypoint mode writes the archive the same way.

A store does only what the writer (launcher.entrypoint.archive) and a retried attempt's
look for its checkpoint (launcher.entrypoint.resume) need: put(rel, data), one new object;
list(rel), the file names directly under a directory; entries(rel), the files and
directories there with their sizes and times; exists(rel), whether one file is there.

- a path or file://: a directory (a volume every pod mounts);
- s3://bucket/prefix: S3's REST API over urllib, signed with AWS Signature Version 4.
  Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else the
  shared credentials file (AWS_SHARED_CREDENTIALS_FILE, profile AWS_PROFILE or default), as
  an s3 secret mounts it; the region from AWS_REGION / AWS_DEFAULT_REGION / the config file
  (AWS_CONFIG_FILE); another S3 (MinIO, moto) from AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL /
  S3_ENDPOINT_URL / the config's endpoint_url, addressed path-style;
- dbfs:/Volumes/...: the Databricks Files API over urllib, DATABRICKS_HOST with the bearer
  DATABRICKS_TOKEN (a databricks secret).

Retrying is the writer's (it keeps a chunk until it is written). A failure is an
ArchiveStoreError of one line: the request, the status and the service's own error text;
the signature and the token travel in headers only, so no message carries them.
"""

from __future__ import annotations

import builtins
import configparser
import datetime
import hashlib
import hmac
import http
import json
import os
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from typing import Callable, Mapping, NamedTuple

from launcher.pod.logarchive import pod_store_problem

HTTP_SECONDS = 15.0
"""One request's timeout: the writer closes within CLOSE_SECONDS, retries included."""
UNRESERVED = "-_.~"


class Listed(NamedTuple):
    """One entry directly under a directory: a file, or a directory (an S3 common prefix)."""

    name: str
    is_dir: bool
    size: int
    mtime: float
    """Seconds since the epoch (0: the listing does not say)."""
    is_link: bool = False


class ArchiveStoreError(Exception):
    """A store that cannot be opened or did not take a request; its text is one line."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def open_pod_store(url: str, env: Mapping[str, str]):
    """The store at `url` with the credentials in `env`; ArchiveStoreError for a URL no pod
    can write (pod_store_problem) or missing credentials. Makes no request."""
    problem = pod_store_problem(url)
    if problem:
        raise ArchiveStoreError(problem)
    if url.startswith("s3://"):
        return S3Store(url, env)
    if url.startswith("dbfs:"):
        return VolumeStore(url, env)
    return DirectoryStore(url[len("file://") :] if url.startswith("file://") else url)


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


class DirectoryStore:
    def __init__(self, root: str):
        self.root = root.rstrip("/") or "/"
        self.url = self.root

    def put(self, rel: str, data: bytes) -> None:
        path = os.path.join(self.root, rel.strip("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # a reader never sees half a chunk

    def get(self, rel: str) -> bytes:
        path = os.path.join(self.root, rel.strip("/"))
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as e:
            raise ArchiveStoreError(f"cannot read {path}: {e.strerror or e}") from None

    def list(self, rel: str) -> builtins.list[str]:
        path = os.path.join(self.root, rel.strip("/"))
        try:
            names = os.listdir(path)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if os.path.isfile(os.path.join(path, n)) and not n.endswith(".tmp"))


# ---- HTTP ------------------------------------------------------------------------------


def _request(
    service: str,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes | None,
    error_text: Callable[[bytes], str],
    timeout: float = HTTP_SECONDS,
) -> bytes:
    """The answer's body; ArchiveStoreError naming the request, its status and what the
    service said (error_text of its body) on failure."""
    shown = url.split("?", 1)[0]
    req = urllib.request.Request(url, data=body, method=method, headers=dict(headers))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.read()
    except urllib.error.HTTPError as e:
        try:
            said = error_text(e.read())
        except Exception:  # noqa: BLE001 - an unreadable error body: the status says enough
            said = ""
        said = " ".join(said.split())[:300]
        try:
            phrase = http.HTTPStatus(e.code).phrase  # a server's own may be any case
        except ValueError:
            phrase = str(e.reason)
        raise ArchiveStoreError(
            f"{service} answered {e.code} {phrase} to {method} {shown}" + (f": {said}" if said else ""), e.code
        ) from None
    except urllib.error.URLError as e:
        raise ArchiveStoreError(f"cannot reach {service} ({method} {shown}): {e.reason}") from None
    except OSError as e:  # a timeout or a reset while reading
        raise ArchiveStoreError(f"{service} did not answer {method} {shown}: {e}") from None


# ---- S3 --------------------------------------------------------------------------------


def _aws_quote(s: str, safe: str = "") -> str:
    return urllib.parse.quote(s, safe=UNRESERVED + safe)


def canonical_query(query: Mapping[str, str]) -> str:
    """SigV4's query string: each name and value percent-encoded (RFC 3986), sorted."""
    return "&".join(f"{k}={v}" for k, v in sorted((_aws_quote(k), _aws_quote(v)) for k, v in query.items()))


def sigv4_headers(
    method: str,
    url: str,
    headers: Mapping[str, str],
    payload_sha256: str,
    *,
    access_key: str,
    secret_key: str,
    region: str,
    service: str,
    now: datetime.datetime,
    session_token: str | None = None,
) -> dict[str, str]:
    """`headers` plus Host, X-Amz-Date, X-Amz-Security-Token (with a session token) and the
    Authorization of AWS Signature Version 4 for the request. `url`'s path and query must be
    already encoded as they will be sent (S3 encodes each path segment once)."""
    parts = urllib.parse.urlsplit(url)
    stamp = now.astimezone(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = dict(headers)
    out["Host"] = parts.netloc
    out["X-Amz-Date"] = stamp
    if session_token:
        out["X-Amz-Security-Token"] = session_token
    signed = sorted((k.lower(), " ".join(str(v).split())) for k, v in out.items())
    names = ";".join(k for k, _ in signed)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    canonical = "\n".join(
        [
            method,
            parts.path or "/",
            canonical_query(dict(query)),
            "".join(f"{k}:{v}\n" for k, v in signed),
            names,
            payload_sha256,
        ]
    )
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret_key).encode()
    for part in (stamp[:8], region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    out["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={names}, Signature={signature}"
    )
    return out


def _ini(path: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(os.path.expanduser(path))
    except configparser.Error as e:
        raise ArchiveStoreError(f"cannot read {path}: {str(e).splitlines()[0]}") from None
    return parser


def _section(parser: configparser.ConfigParser, *names: str) -> Mapping[str, str]:
    for name in names:
        if parser.has_section(name):
            return parser[name]
    return {}


def _code_and_message(code: str, message: str) -> str:
    """A service's error as one line: its code and its words, whichever it gave."""
    return f"{code}: {message}" if code and message else code or message


def _s3_error(body: bytes) -> str:
    root = ET.fromstring(body)
    return _code_and_message(root.findtext("Code") or "", root.findtext("Message") or "")


class S3Store:
    timeout = HTTP_SECONDS
    """One request's timeout, in seconds."""

    def __init__(self, url: str, env: Mapping[str, str]):
        bucket, _, prefix = url[len("s3://") :].partition("/")
        self.url, self.bucket, self.prefix = url.rstrip("/"), bucket, prefix.strip("/")
        profile = env.get("AWS_PROFILE") or "default"
        creds = _section(_ini(env.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials"), profile)
        config = _section(
            _ini(env.get("AWS_CONFIG_FILE") or "~/.aws/config"),
            "default" if profile == "default" else f"profile {profile}",
            profile,
        )
        if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
            self.access_key, self.secret_key = env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
            self.session_token = env.get("AWS_SESSION_TOKEN") or None
        else:
            found = creds if creds.get("aws_access_key_id") else config
            self.access_key = found.get("aws_access_key_id") or ""
            self.secret_key = found.get("aws_secret_access_key") or ""
            self.session_token = found.get("aws_session_token") or None
        if not (self.access_key and self.secret_key):
            raise ArchiveStoreError(
                f"{self.url} needs AWS credentials: none in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or in the "
                f"shared credentials file (profile {profile}); give the profile's log_store_secret an s3 secret"
            )
        self.region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or config.get("region") or "us-east-1"
        endpoint = (
            env.get("AWS_ENDPOINT_URL_S3")
            or env.get("AWS_ENDPOINT_URL")
            or env.get("S3_ENDPOINT_URL")
            or config.get("endpoint_url")
            or ""
        )
        if endpoint:  # another S3: path-style, https://host/bucket/key
            self.base = f"{endpoint.rstrip('/')}/{_aws_quote(bucket)}"
        elif "." in bucket:  # a virtual host's name would not match AWS's certificate
            self.base = f"https://s3.{self.region}.amazonaws.com/{_aws_quote(bucket)}"
        else:
            self.base = f"https://{bucket}.s3.{self.region}.amazonaws.com"
        self.service = f"S3 at {endpoint.rstrip('/')}" if endpoint else "S3"

    def _call(self, method: str, key: str, query: Mapping[str, str], body: bytes = b"") -> bytes:
        url = self.base + "/" + _aws_quote(key, "/")
        if query:
            url += "?" + canonical_query(query)
        digest = hashlib.sha256(body).hexdigest()
        headers = {"X-Amz-Content-Sha256": digest}
        if method == "PUT":  # urllib would say application/x-www-form-urlencoded
            headers["Content-Type"] = "application/octet-stream"
        headers = sigv4_headers(
            method,
            url,
            headers,
            digest,
            access_key=self.access_key,
            secret_key=self.secret_key,
            session_token=self.session_token,
            region=self.region,
            service="s3",
            now=datetime.datetime.now(datetime.timezone.utc),
        )
        return _request(self.service, method, url, headers, body if method == "PUT" else None, _s3_error, self.timeout)

    def put(self, rel: str, data: bytes) -> None:
        self._call("PUT", _join(self.prefix, rel), {}, data)

    def get(self, rel: str) -> bytes:
        return self._call("GET", _join(self.prefix, rel), {})

    def exists(self, rel: str) -> bool:
        try:
            self._call("HEAD", _join(self.prefix, rel), {})
        except ArchiveStoreError as e:
            if e.status == 404:
                return False
            raise
        return True

    def list(self, rel: str) -> builtins.list[str]:
        return sorted(e.name for e in self.entries(rel) if not e.is_dir)

    def entries(self, rel: str, max_pages: int | None = None) -> builtins.list[Listed]:
        """What is directly under `rel`: ListObjectsV2 with the delimiter "/" (its objects, and
        its common prefixes as directories), page after page by the continuation token, at
        most `max_pages` pages."""
        base = _join(self.prefix, rel)
        prefix = base + "/" if base else ""
        found: list[Listed] = []
        token = None
        pages = 0
        while True:
            query = {"list-type": "2", "prefix": prefix, "delimiter": "/"}
            if token:
                query["continuation-token"] = token
            page = ET.fromstring(self._call("GET", "", query))
            pages += 1
            ns = page.tag[: page.tag.index("}") + 1] if page.tag.startswith("{") else ""
            for c in page.iter(f"{ns}Contents"):
                name = (c.findtext(f"{ns}Key") or "")[len(prefix) :]
                if name:
                    size = c.findtext(f"{ns}Size") or "0"
                    found.append(Listed(name, False, int(size), _epoch(c.findtext(f"{ns}LastModified"))))
            for c in page.iter(f"{ns}CommonPrefixes"):
                name = (c.findtext(f"{ns}Prefix") or "")[len(prefix) :].rstrip("/")
                if name:
                    found.append(Listed(name, True, 0, 0.0))
            token = page.findtext(f"{ns}NextContinuationToken")
            if page.findtext(f"{ns}IsTruncated") != "true" or not token or (max_pages and pages >= max_pages):
                return found


def _epoch(iso: str | None) -> float:
    """An S3 LastModified (2026-01-02T03:04:05.000Z) in seconds since the epoch; 0 if unreadable."""
    try:
        return datetime.datetime.fromisoformat((iso or "").replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


# ---- Databricks Volumes -----------------------------------------------------------------


def _databricks_error(body: bytes) -> str:
    said = json.loads(body)
    return _code_and_message(said.get("error_code") or "", said.get("message") or "")


class VolumeStore:
    timeout = HTTP_SECONDS
    """One request's timeout, in seconds."""

    def __init__(self, url: str, env: Mapping[str, str]):
        self.url = url.rstrip("/")
        self.root = "/" + self.url[len("dbfs:") :].strip("/")  # /Volumes/c/s/v/...
        host, token = env.get("DATABRICKS_HOST", "").strip(), env.get("DATABRICKS_TOKEN", "").strip()
        missing = [n for n, v in (("DATABRICKS_HOST", host), ("DATABRICKS_TOKEN", token)) if not v]
        if missing:
            raise ArchiveStoreError(
                f"{self.url} needs {' and '.join(missing)}; give the profile's log_store_secret a databricks secret"
            )
        self.host = (host if "://" in host else "https://" + host).rstrip("/")
        self._auth = {"Authorization": f"Bearer {token}"}
        self.service = f"Databricks at {self.host}"

    def _url(self, api: str, rel: str, query: Mapping[str, str]) -> str:
        path = urllib.parse.quote("/" + _join(self.root, rel), safe="/")
        return f"{self.host}/api/2.0/fs/{api}{path}" + ("?" + urllib.parse.urlencode(query) if query else "")

    def put(self, rel: str, data: bytes) -> None:
        headers = dict(self._auth, **{"Content-Type": "application/octet-stream"})
        url = self._url("files", rel, {"overwrite": "true"})
        _request(self.service, "PUT", url, headers, data, _databricks_error, self.timeout)

    def get(self, rel: str) -> bytes:
        url = self._url("files", rel, {})
        return _request(self.service, "GET", url, self._auth, None, _databricks_error, self.timeout)

    def exists(self, rel: str) -> bool:
        try:
            _request(
                self.service, "HEAD", self._url("files", rel, {}), self._auth, None, _databricks_error, self.timeout
            )
        except ArchiveStoreError as e:
            if e.status == 404:
                return False
            raise
        return True

    def list(self, rel: str) -> builtins.list[str]:
        return sorted(e.name for e in self.entries(rel) if not e.is_dir)

    def entries(self, rel: str, max_pages: int | None = None) -> builtins.list[Listed]:
        """What is directly under `rel`: the Files API's directory listing, page after page by
        its page token, at most `max_pages` pages; none where the directory is not there."""
        found: list[Listed] = []
        token = None
        pages = 0
        while True:
            query: dict[str, str] = {"page_token": token} if token else {}
            try:
                body = _request(
                    self.service,
                    "GET",
                    self._url("directories", rel, query),
                    self._auth,
                    None,
                    _databricks_error,
                    self.timeout,
                )
            except ArchiveStoreError as e:
                if e.status == 404 and not found:
                    return []  # not made yet: a directory comes with its first file
                raise
            pages += 1
            page = json.loads(body or b"{}")
            for item in page.get("contents", []):
                directory = bool(item.get("is_directory"))
                size = 0 if directory else int(item.get("file_size") or 0)
                found.append(Listed(item["name"], directory, size, int(item.get("last_modified") or 0) / 1000))
            token = page.get("next_page_token")
            if not token or (max_pages and pages >= max_pages):
                return found

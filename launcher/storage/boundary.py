"""The one boundary between storage clients and the user: every exception a client raises
(databricks-sdk, botocore, requests, google-api-core, fsspec, OSError) becomes one of three
LauncherErrors, in one set of words, here and nowhere else. Stores wrap each client call
in `boundary()`; an exception that is none of these is a bug and passes through.

A message reads `<service> <what happened> while <action> <url>[: <the service's own text>]`,
and its hint says what to do; a connection failure's words are launcher.errors'
(connection_failure), the same for a cluster, a store and a tracking server. Tokens never
appear: only the host, the URL and the text the server sent back.
"""

from __future__ import annotations

import socket
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

from launcher.errors import InputError, LauncherError, NotFoundError, connection_failure


class StorageError(LauncherError):
    """Storage failed: an error the client's retries did not get past, or a host it could not
    reach. Exit 1; a check that runs before any work reports it as bad input instead."""


class StorageAccessError(InputError):
    """Credentials that are missing or rejected, or a permission their user lacks. Exit 2."""


class StorageNotFoundError(NotFoundError):
    """A file, directory, Volume or bucket that is not there. Exit 2."""


@dataclass(frozen=True)
class Service:
    """Who answers a store's calls, in the words of its messages."""

    name: str
    """The subject of a message: 'Databricks at https://…', 'S3 at http://…', 'the local filesystem'."""
    address: str = ""
    """What a connection error could not reach: 'DATABRICKS_HOST https://…'; empty: not a network service."""
    retry_s: float = 0
    """How long the client retried before giving up, for 'gave up after N s'."""
    rejected_hint: str = ""
    denied_hint: str = ""
    reach_hint: str = ""
    catch_all: bool = False
    """The client raises types of its own (streaming's google and oci clients): every
    exception from it is a storage failure, not a bug."""


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else ""


def _with_text(message: str, text: str) -> str:
    return f"{message}: {text}" if text else message


def _databricks(e: BaseException, service: Service, doing: str) -> LauncherError | None:
    errors = sys.modules.get("databricks.sdk.errors")
    if errors is None or not isinstance(e, errors.DatabricksError):
        return None
    text = first_line(e).split(" Config: ")[0]  # the SDK appends its settings to a 403
    if isinstance(e, errors.Unauthenticated):  # the server's text only repeats it
        return StorageAccessError(
            f"{service.name} rejected the token (401 Unauthenticated) while {doing}", hint=service.rejected_hint
        )
    if isinstance(e, errors.PermissionDenied):
        return StorageAccessError(
            _with_text(f"{service.name} denied access (403 Permission denied) while {doing}", text),
            hint=service.denied_hint,
        )
    if isinstance(e, errors.NotFound):
        return StorageNotFoundError(_with_text(f"{service.name} answered 404 Not found while {doing}", text))
    code = e.error_code or type(e).__name__
    return StorageError(_with_text(f"{service.name} failed ({code}) while {doing}", text))


_S3_REJECTED = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "TokenRefreshRequired"}
_S3_MISSING = {"NoSuchKey", "NoSuchBucket", "NotFound", "404"}


def _botocore(e: BaseException, service: Service, doing: str) -> LauncherError | None:
    exceptions = sys.modules.get("botocore.exceptions")
    if exceptions is None:
        return None
    if isinstance(e, exceptions.ClientError):
        error = e.response.get("Error", {})
        code = str(error.get("Code", "")) or str(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
        text = str(error.get("Message", "") or "")
        if code in _S3_REJECTED:
            return StorageAccessError(
                f"{service.name} rejected the credentials ({code}) while {doing}", hint=service.rejected_hint
            )
        if code in ("AccessDenied", "403", "AllAccessDisabled"):
            return StorageAccessError(
                _with_text(f"{service.name} denied access (403 {code}) while {doing}", text), hint=service.denied_hint
            )
        if code in _S3_MISSING:
            return StorageNotFoundError(_with_text(f"{service.name} answered {code} while {doing}", text))
        return StorageError(_with_text(f"{service.name} failed ({code or 'error'}) while {doing}", text))
    if isinstance(e, exceptions.NoCredentialsError):
        return StorageAccessError(f"{service.name} has no credentials to use while {doing}", hint=service.rejected_hint)
    if isinstance(
        e, exceptions.EndpointConnectionError | exceptions.ConnectTimeoutError | exceptions.ConnectionClosedError
    ):
        return _unreachable(e, service, doing)
    if isinstance(e, exceptions.BotoCoreError):
        return StorageError(_with_text(f"{service.name} failed while {doing}", first_line(e) or type(e).__name__))
    return None


def _google(e: BaseException, service: Service, doing: str) -> LauncherError | None:
    exceptions = sys.modules.get("google.api_core.exceptions")
    if exceptions is None or not isinstance(e, exceptions.GoogleAPICallError):
        return None
    text = first_line(e)
    if e.code == 401:
        return StorageAccessError(_with_text(f"{service.name} rejected the credentials (401) while {doing}", text))
    if e.code == 403:
        return StorageAccessError(_with_text(f"{service.name} denied access (403) while {doing}", text))
    if e.code == 404:
        return StorageNotFoundError(_with_text(f"{service.name} answered 404 Not found while {doing}", text))
    return StorageError(_with_text(f"{service.name} failed ({e.code}) while {doing}", text))


def _unreachable(cause: BaseException, service: Service, doing: str, *, retried: bool = True) -> StorageError:
    """`retried`: the client's own call, after its retries; otherwise our one TCP connect."""
    after = f" (gave up after {service.retry_s:g} s)" if service.retry_s and retried else ""
    why = connection_failure(cause, connecting=not retried).words
    return StorageError(
        f"cannot reach {service.address or service.name}{after} while {doing}: {why}", hint=service.reach_hint
    )


_reached: set[tuple[str, int]] = set()


def check_reachable(url: str, service: Service, action: str, target: str, *, timeout: float) -> None:
    """One TCP connect to `url`'s host before a client's first call, within `timeout`.
    databricks-sdk retries a refused connection for its whole retry window (it takes one
    for a network glitch), so a workspace that is down took 20 s to fail; this fails in
    milliseconds. Skipped where a proxy carries the requests (the proxy answers, not the
    host); once per host and process."""
    try:
        parts = urlsplit(url)
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        return
    host = parts.hostname
    if not host or port is None or (host, port) in _reached:
        return
    if parts.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(host):
        return
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise _unreachable(e, service, f"{action} {target}", retried=False) from None
    _reached.add((host, port))


def _is_connection_error(e: BaseException) -> bool:
    requests = sys.modules.get("requests.exceptions")
    if requests is not None and isinstance(e, requests.ConnectionError | requests.Timeout):
        return True
    return isinstance(e, ConnectionError | TimeoutError | socket.gaierror)


def translate(e: BaseException, service: Service, action: str, url: str) -> LauncherError | None:
    """The LauncherError for a client's exception, or None for one that is not the
    storage's (a bug, which the caller lets through)."""
    doing = f"{action} {url}"
    if isinstance(e, TimeoutError) and service.retry_s:
        # databricks-sdk: its retry window ran out; the cause is the last attempt's error.
        cause = e.__cause__ or e.__context__
        mapped = _databricks(cause, service, doing) if cause is not None else None
        if mapped is not None:
            return StorageError(
                f"{mapped.message} (still failing after {service.retry_s:g} s of retries)", hint=mapped.hint
            )
        return _unreachable(cause or e, service, doing)
    for mapping in (_databricks, _botocore, _google):
        mapped = mapping(e, service, doing)
        if mapped is not None:
            return mapped
    if service.address and _is_connection_error(e):
        return _unreachable(e, service, doing)
    if isinstance(e, FileNotFoundError):
        return StorageNotFoundError(f"{service.name} has no such file or directory while {doing}")
    if isinstance(e, PermissionError):
        return StorageAccessError(
            _with_text(f"{service.name} denied access while {doing}", e.strerror or ""), hint=service.denied_hint
        )
    if isinstance(e, ImportError):
        return InputError(f"{url} needs a package that is not installed: {first_line(e)}")
    if isinstance(e, OSError) or service.catch_all:
        return StorageError(
            _with_text(
                f"{service.name} failed while {doing}",
                f"{type(e).__name__}: {first_line(e)}" if first_line(e) else type(e).__name__,
            )
        )
    return None


@contextmanager
def boundary(service: Service, action: str, url: str) -> Iterator[None]:
    """Run a client call; what it raises leaves as the LauncherError `translate` gives."""
    try:
        yield
    except LauncherError:
        raise
    except Exception as e:
        mapped = translate(e, service, action, url)
        if mapped is None:
            raise
        raise mapped from None


def as_input_error(e: LauncherError) -> InputError:
    """Before any work starts, every storage failure is the user's to fix (exit 2)."""
    return e if isinstance(e, InputError) else InputError(e.message, hint=e.hint)

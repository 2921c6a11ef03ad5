"""Errors a user may see. Each carries the exit code the CLI returns for it.

Exit codes follow the launcher's contract: 2 for bad input (a spec, a flag, a
name), 1 for a run or an operation that failed.
"""

from __future__ import annotations

import errno
import os
import resource
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple


class LauncherError(Exception):
    """An error with a message meant for the user; never shown with a traceback."""

    exit_code = 1

    def __init__(
        self, message: str, *, exit_code: int | None = None, hint: str | None = None, warnings: list[str] | None = None
    ):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.warnings = list(warnings or [])
        """What else the user should know, shown before the message: e.g. the cluster profiles
        a run was not looked for in, because they could not be asked."""
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class InputError(LauncherError):
    """Bad input from the user: a spec, a flag value, a file. Exit code 2."""

    exit_code = 2


class FieldError(InputError):
    """Bad input in one field of a resolved spec, found after it loaded (a backend's check):
    the CLI places it in the spec file (file:line: field: message), as a load's own errors."""

    def __init__(self, field: str, message: str, *, hint: str | None = None):
        super().__init__(f"{field}: {message}", hint=hint)
        self.field = field
        self.detail = message


class NotFoundError(InputError):
    """A named run, secret or cluster that does not exist."""


class LogsGoneError(LauncherError):
    """An attempt's log that can no longer be read: its pods are gone (a restart, a stop, a
    TTL) and no log archive holds it. Exit code 1."""


class NeverStartedError(LauncherError):
    """An attempt that ended without starting a container (an image that does not pull, a
    missing secret): it has no log, and the message says why. Exit code 1."""


class ClusterUnreachable(LauncherError):
    """A cluster whose API server could not be reached at all (refused, timed out, no
    route): the cluster is away, not the request wrong. Exit code 1."""


class RunNotFound(NotFoundError):
    """No run of that name (or spec name, or glob) where the launcher could look."""


class StateFileError(InputError):
    """A file the launcher keeps its state in (a database, the secret store) that cannot
    be used; the message names it, the hint says how to recover."""

    @classmethod
    def from_sqlite(cls, path, error: Exception, *, forgets: str) -> StateFileError:
        """`forgets`: what moving the file away loses, for the hint."""
        text = str(error)
        if "full" in text or "disk I/O" in text:
            return cls(
                f"{path}: cannot write it ({text}); is the disk full?",
                hint=f"free some space under {path.parent} and run again",
            )
        if "unable to open" in text or "readonly" in text:
            return cls(
                f"{path}: cannot open it for writing ({text})", hint=f"check that {path.parent} is a writable directory"
            )
        if "locked" in text:
            return cls(
                f"{path}: another launcher process holds it locked ({text})", hint="wait for it to finish and run again"
            )
        return cls(
            f"{path} is corrupt ({text})", hint=f"move it away and run again (mv {path} {path}.corrupt); {forgets}"
        )


def open_file_limit() -> int:
    """This process's open-file limit (ulimit -n, the soft RLIMIT_NOFILE)."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def os_error_words(e: OSError) -> str:
    """Why a filesystem call failed, in words, with the errno's name for a search: one
    place for every message that names an OSError's cause."""
    code = e.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        words = "the disk is full" if code == errno.ENOSPC else "the disk quota is used up"
    elif code == errno.EROFS:
        words = "the file system is read-only"
    elif code in (errno.EACCES, errno.EPERM):
        words = "permission denied"
    elif code == errno.ENOTDIR:
        words = "not a directory"
    elif code == errno.EISDIR:
        words = "is a directory"
    elif code == errno.EMFILE:
        words = f"too many open files (this process may open {open_file_limit()}: ulimit -n)"
    elif code == errno.ENFILE:
        words = "too many open files on this machine"
    elif code == errno.ENOENT:
        words = "no such file or directory"
    elif code is not None:
        words = (e.strerror or os.strerror(code)).lower()
    else:
        return str(e) or type(e).__name__
    name = errno.errorcode.get(code)
    return f"{words} ({name})" if name else words


# Why a network call got no answer: the one set of words for a cluster's API server, a
# store and a tracking server (connection_failure), and a reason for code to branch on.
CONNECT_FAILED = "ConnectFailed"
"""Refused, no route, a host name that does not resolve: nothing answered."""
CONNECT_TIMEOUT = "ConnectTimeout"
"""Connecting took longer than its timeout: nothing answered."""
TLS = "TLS"
"""The TLS handshake failed (an untrusted certificate, a server that does not speak TLS)."""
READ_TIMEOUT = "ReadTimeout"
"""Connected and sent, but no answer in time: the request may have been done."""
CONNECTION_BROKEN = "ConnectionBroken"
"""The connection broke before the answer came: the request may have been done."""
CONNECTION_ERROR = "ConnectionError"
"""Some other failure, named by its type and first line."""
UNREACHABLE = frozenset({CONNECT_FAILED, CONNECT_TIMEOUT})
"""The reasons that mean the host is away (ClusterUnreachable), not the request wrong."""


class ConnectionFailure(NamedTuple):
    words: str
    """What happened, in a few words: 'connection refused', 'connecting timed out'."""
    reason: str
    """One of the reasons above."""


def connection_failure(e: BaseException, *, connecting: bool = False) -> ConnectionFailure:
    """Why a network call failed with `e`, whichever client raised it (urllib3, requests,
    botocore, a bare socket): read from the causes chained in it (a client's wrapper holds
    the socket's or ssl's error), or, for a client that kept only text (MLflow), from its
    text. Never the nested reprs that requests and urllib3 print. `connecting`: `e` came
    from opening a TCP connection (a reachability check), so a bare socket timeout is the
    connect's; otherwise it is a read's (urllib3 names a connect's timeout itself)."""
    chain = _causes(e)
    ssl = sys.modules.get("ssl")
    socket = sys.modules.get("socket")
    urllib3 = sys.modules.get("urllib3.exceptions")
    if ssl is not None:
        for cause in chain:
            if isinstance(cause, ssl.SSLCertVerificationError):
                return ConnectionFailure(
                    f"TLS certificate not trusted ({cause.verify_message})"
                    if cause.verify_message
                    else "TLS certificate not trusted",
                    TLS,
                )
        tls = [c for c in chain if isinstance(c, ssl.SSLError)]
        if tls:
            return ConnectionFailure(f"TLS failed: {_first_line(tls[-1])}", TLS)
    if urllib3 is not None:
        tls = [c for c in chain if isinstance(c, urllib3.SSLError)]
        if tls:
            return ConnectionFailure(f"TLS failed: {_first_line(tls[-1])}", TLS)
    for cause in chain:
        if socket is not None and isinstance(cause, socket.gaierror):
            return ConnectionFailure(
                f"cannot resolve the host name ({cause.strerror or cause})".lower(), CONNECT_FAILED
            )
    if urllib3 is not None:
        if any(isinstance(c, urllib3.ReadTimeoutError) for c in chain):
            return ConnectionFailure("the server did not answer in time", READ_TIMEOUT)
        # NewConnectionError is a ConnectTimeoutError too, whatever its cause was.
        if any(
            isinstance(c, urllib3.ConnectTimeoutError) and not isinstance(c, urllib3.NewConnectionError) for c in chain
        ):
            return ConnectionFailure("connecting timed out", CONNECT_TIMEOUT)
    for cause in chain:
        if isinstance(cause, ConnectionResetError | ConnectionAbortedError | BrokenPipeError):
            return ConnectionFailure("the connection broke before the answer came", CONNECTION_BROKEN)
        if isinstance(cause, TimeoutError) and connecting:
            return ConnectionFailure("connecting timed out", CONNECT_TIMEOUT)
        if isinstance(cause, TimeoutError):
            return ConnectionFailure("the server did not answer in time", READ_TIMEOUT)
        if isinstance(cause, OSError) and cause.errno:
            return ConnectionFailure(os.strerror(cause.errno).lower(), CONNECT_FAILED)
    if urllib3 is not None and any(isinstance(c, urllib3.ProtocolError) for c in chain):
        return ConnectionFailure("the connection broke before the answer came", CONNECTION_BROKEN)
    text = " ".join(str(c) for c in chain)
    for needles, failure in _TEXT_CAUSES:
        if any(needle in text for needle in needles):
            return failure
    return ConnectionFailure(
        f"{type(e).__name__}: {_first_line(e)}" if str(e).strip() else type(e).__name__, CONNECTION_ERROR
    )


_TEXT_CAUSES = (
    (("Connection refused",), ConnectionFailure("connection refused", CONNECT_FAILED)),
    (
        ("Name or service not known", "nodename nor servname", "Failed to resolve", "Temporary failure in name"),
        ConnectionFailure("cannot resolve the host name", CONNECT_FAILED),
    ),
    (("CERTIFICATE_VERIFY_FAILED",), ConnectionFailure("TLS certificate not trusted", TLS)),
    (("Read timed out",), ConnectionFailure("the server did not answer in time", READ_TIMEOUT)),
    (("connect timeout", "ConnectTimeout"), ConnectionFailure("connecting timed out", CONNECT_TIMEOUT)),
    (("timed out",), ConnectionFailure("timed out", READ_TIMEOUT)),
    (
        ("Connection reset", "Connection aborted", "RemoteDisconnected"),
        ConnectionFailure("the connection broke before the answer came", CONNECTION_BROKEN),
    ),
)
"""What a client that kept only text (MLflow's exceptions) says, and what it means."""


def _causes(e: BaseException) -> list[BaseException]:
    """`e` and what it wraps, outermost first: urllib3's `reason`, exceptions passed as
    arguments (requests, botocore), and the chained __cause__ and __context__."""
    found: list[BaseException] = []
    todo = [e]
    while todo:
        cause = todo.pop(0)
        if any(cause is seen for seen in found):
            continue
        found.append(cause)
        inner = [getattr(cause, "reason", None), *cause.args, cause.__cause__, cause.__context__]
        todo.extend(c for c in inner if isinstance(c, BaseException))
    return found


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


FILESYSTEM_ERRNOS = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EROFS,
        errno.EACCES,
        errno.EPERM,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EMFILE,
        errno.ENFILE,
        errno.ENOENT,
        errno.EEXIST,
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.EIO,
        errno.ENXIO,
        errno.ENODEV,
        errno.ETXTBSY,
        errno.EFBIG,
        errno.EXDEV,
    }
)


def _blocking_file(path: Path) -> Path | None:
    """The file that stands where `path` needs a directory (ENOTDIR): the first ancestor
    that exists and is not one."""
    for parent in [path, *path.parents]:
        if parent.exists() or parent.is_symlink():
            return None if parent.is_dir() else parent
    return None


class FileSystemError(InputError):
    """A file or directory the launcher cannot use: the launcher home, an output or an
    input path. Names the path and the cause; exit 2, no traceback."""

    @classmethod
    def of(cls, e: OSError, path: str | os.PathLike | None = None, doing: str = "") -> FileSystemError:
        """`path`: what the command was using (the OSError's own filename when not given);
        `doing`: what it was doing to it, a verb that takes the path ("write"), for
        'cannot write PATH: the disk is full (ENOSPC)'."""
        where = os.fspath(path) if path is not None else (os.fsdecode(e.filename) if e.filename is not None else "")
        if e.errno == errno.ENOTDIR and where:
            blocking = _blocking_file(Path(e.filename if e.filename is not None else where))
            if blocking is not None:
                what = "is a file, not a directory" if blocking.is_file() else "is not a directory"
                return cls(
                    f"{blocking} {what}" + (f" (needed for {where})" if str(blocking) != where else ""),
                    hint=f"move {blocking} away, or choose another path",
                )
        cause = os_error_words(e)
        if doing and where:
            message = f"cannot {doing} {where}: {cause}"
        elif where:
            message = f"{where}: {cause}"
        else:
            message = f"cannot {doing}: {cause}" if doing else cause
        hint = None
        if e.errno in (errno.ENOSPC, errno.EDQUOT) and where:
            hint = f"free some space on the disk that holds {where} and run again"
        elif e.errno == errno.EMFILE:
            hint = "raise the limit (ulimit -n) or do less at once"
        return cls(message, hint=hint)


@contextmanager
def file_boundary(path: str | os.PathLike, doing: str) -> Iterator[None]:
    """Filesystem work on `path` (an output or input the user named, or the launcher home):
    an OSError it raises leaves as a FileSystemError naming the path and the cause; a
    write to a full disk raises one without a filename, so only the caller can name it."""
    try:
        yield
    except OSError as e:
        if e.errno not in FILESYSTEM_ERRNOS:
            raise
        if e.filename is not None and os.fsdecode(e.filename) != os.fspath(path):
            raise FileSystemError.of(e) from None  # another file than `path`: it names itself
        raise FileSystemError.of(e, path, doing) from None


@dataclass(frozen=True)
class SpecIssue:
    """One problem in a spec file, located as precisely as we can."""

    message: str
    field: str = ""
    file: str | None = None
    line: int | None = None
    column: int | None = None

    def render(self) -> str:
        where = ""
        if self.file:
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        field = f"{self.field}: " if self.field else ""
        return f"{where}{field}{self.message}"


class SpecError(InputError):
    """One or more problems in a spec; each is rendered as file:line:col: field: message."""

    def __init__(self, issues: list[SpecIssue], *, hint: str | None = None):
        self.issues = list(issues)
        super().__init__("\n".join(i.render() for i in self.issues), hint=hint)


def internal_error_line(e: BaseException) -> str:
    """A bug, in one line for a user: the exception's type and the first line of its text
    (some exceptions, a client's HTTP error, carry headers and bodies in str())."""
    first = (str(e).strip().splitlines() or [""])[0]
    return f"internal error: {type(e).__name__}: {first}" if first else f"internal error: {type(e).__name__}"

"""Errors a user may see. Each carries the exit code the CLI returns for it.

Exit codes follow the launcher's contract: 2 for bad input (a spec, a flag, a
name), 1 for a run or an operation that failed.
"""

from __future__ import annotations

from dataclasses import dataclass


class LauncherError(Exception):
    """An error with a message meant for the user; never shown with a traceback."""

    exit_code = 1

    def __init__(self, message: str, *, exit_code: int | None = None, hint: str | None = None,
                 warnings: list[str] | None = None):
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


class StateFileError(InputError):
    """A file the launcher keeps its state in (a database, the secret store) that cannot
    be used; the message names it, the hint says how to recover."""

    @classmethod
    def from_sqlite(cls, path, error: Exception, *, forgets: str) -> StateFileError:
        """`forgets`: what moving the file away loses, for the hint."""
        text = str(error)
        if "full" in text or "disk I/O" in text:
            return cls(f"{path}: cannot write it ({text}); is the disk full?",
                       hint=f"free some space under {path.parent} and run again")
        if "unable to open" in text or "readonly" in text:
            return cls(f"{path}: cannot open it for writing ({text})",
                       hint=f"check that {path.parent} is a writable directory")
        if "locked" in text:
            return cls(f"{path}: another launcher process holds it locked ({text})",
                       hint="wait for it to finish and run again")
        return cls(f"{path} is corrupt ({text})",
                   hint=f"move it away and run again (mv {path} {path}.corrupt); {forgets}")


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

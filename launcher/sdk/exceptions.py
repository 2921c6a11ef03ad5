"""The SDK's typed errors. Each is a launcher.errors class (or a subclass of one), so the
CLI, built on the SDK, shows it and exits with the same code as before: 2 for bad input
(RunNotFound, ValidationError, NotSupported), 1 for a cluster that is away or a wait that
ran out."""

from __future__ import annotations

from launcher.backends.capabilities import NotSupported
from launcher.errors import ClusterUnreachable, LauncherError, NotFoundError, RunNotFound, SpecError

__all__ = ["ClusterUnreachable", "LauncherError", "NotSupported", "RunNotFound", "ValidationError", "WaitTimeout"]


def run_not_found(e: NotFoundError) -> RunNotFound:
    """A NotFoundError about a run (a backend's get), as the typed RunNotFound."""
    return e if isinstance(e, RunNotFound) else RunNotFound(e.message, hint=e.hint, warnings=e.warnings)


class ValidationError(SpecError):
    """A run config that is not valid: each of `issues` names its file, line and field
    (file and line are None for a config built from a dict). `file`, `line` and `field`
    are the first issue's."""

    @classmethod
    def of(cls, e: SpecError) -> ValidationError:
        return e if isinstance(e, ValidationError) else cls(e.issues, hint=e.hint)

    @property
    def file(self) -> str | None:
        return self.issues[0].file if self.issues else None

    @property
    def line(self) -> int | None:
        return self.issues[0].line if self.issues else None

    @property
    def field(self) -> str:
        return self.issues[0].field if self.issues else ""


class WaitTimeout(LauncherError, TimeoutError):
    """wait_for_run_status ran out of time; `run` is the run as it was last seen."""

    def __init__(self, message: str, run=None):
        super().__init__(message)
        self.run = run

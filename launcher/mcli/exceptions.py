"""mcli's exception classes, and how the launcher's errors become them.

mcli's callers catch MAPIException and read its `status` (an HTTPStatus): 404 for a run or
secret that is not there, 400 for a request that is wrong. The launcher's typed errors map
onto those (the original is the exception's __cause__); NotSupported is a MAPIException
too, 501, for what only the MosaicML platform has.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus

from launcher.errors import ClusterUnreachable, LauncherError, NotFoundError, SpecError

__all__ = [
    "MAPIException",
    "MCLIConfigError",
    "MCLIException",
    "MCLIRunConfigValidationError",
    "MultiMAPIException",
    "NotSupported",
    "RunConfigException",
    "translated",
]

DEFAULT_MESSAGE = "Unknown Error"


class MCLIException(Exception):
    """The base of every error launcher.mcli raises, as in mcli."""


class MCLIConfigError(MCLIException):
    """mcli's error for a local config that cannot be loaded."""


class MCLIRunConfigValidationError(MCLIException):
    """A RunConfig that cannot be finalized (FinalRunConfig.finalize_config)."""


class MAPIException(MCLIException):
    """A request that failed: `status` (an HTTPStatus), `message`, and `description`
    (the launcher's hint, where it has one). str() is mcli's "Error 404: message"."""

    status: HTTPStatus
    message: str
    description: str | None = None

    def __init__(self, status: HTTPStatus, message: str = DEFAULT_MESSAGE, description: str | None = None):
        super().__init__()
        self.status = status
        self.message = message
        self.description = description

    def __str__(self) -> str:
        text = f"Error {self.status.value}: {self.message}"
        return f"{text}. {self.description}" if self.description else text


class RunConfigException(MAPIException):
    """A run that could not be created from its config (status 400); the message names
    each field that is wrong, as the launcher's run YAML checks word it."""

    FIELD_PATTERN = re.compile(r"([A-Za-z]+) is a required field")

    def __init__(self, status: HTTPStatus, message: str = DEFAULT_MESSAGE, description: str | None = None):
        super().__init__(status, message, description)


class MultiMAPIException(MAPIException):
    """Several MAPIExceptions at once; str() shows each."""

    def __init__(self, errors: list[MAPIException]) -> None:
        self.errors = errors
        super().__init__(max(e.status for e in errors))

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)


class NotSupported(MAPIException):
    """What only the MosaicML platform has (organizations, API keys, inference
    deployments) or what the launcher's backends cannot do: status 501, the message
    says which and why."""

    def __init__(self, message: str, description: str | None = None):
        super().__init__(HTTPStatus.NOT_IMPLEMENTED, message, description)


def mapi_error(e: LauncherError) -> MAPIException:
    """The MAPIException a launcher error is to an mcli caller."""
    from launcher.backends.capabilities import NotSupported as BackendCannot

    if isinstance(e, BackendCannot):
        return NotSupported(e.message, e.hint)
    if isinstance(e, NotFoundError):
        return MAPIException(HTTPStatus.NOT_FOUND, e.message, e.hint)
    if isinstance(e, SpecError):
        return RunConfigException(HTTPStatus.BAD_REQUEST, e.message, e.hint)
    if isinstance(e, ClusterUnreachable):
        return MAPIException(HTTPStatus.SERVICE_UNAVAILABLE, e.message, e.hint)
    status = HTTPStatus.BAD_REQUEST if e.exit_code == 2 else HTTPStatus.INTERNAL_SERVER_ERROR
    return MAPIException(status, e.message, e.hint)


@contextmanager
def translated() -> Iterator[None]:
    """Raise the launcher's errors inside as mcli's (a wait's TimeoutError stays one, as in mcli)."""
    try:
        yield
    except TimeoutError:
        raise
    except LauncherError as e:
        raise mapi_error(e) from e

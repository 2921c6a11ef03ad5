"""mcli's RunStatus: the launcher's statuses by the same names, with mcli's order and methods
(is_terminal() a method, before()/after(), from_string() that never raises)."""

from __future__ import annotations

import re
from enum import Enum

__all__ = ["RunStatus"]


class RunStatus(Enum):
    """Possible statuses of a run, as in mcli."""

    PENDING = "PENDING"
    QUEUED = "QUEUED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    TERMINATING = "TERMINATING"
    COMPLETED = "COMPLETED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"

    def __str__(self) -> str:
        return self.value

    @property
    def _rank(self) -> int:
        # mcli's order, earliest first: UNKNOWN before all, FAILED the latest.
        return _ORDER.index(self)

    def __lt__(self, other: RunStatus) -> bool:
        return self._rank < _checked(other)._rank

    def __gt__(self, other: RunStatus) -> bool:
        return self._rank > _checked(other)._rank

    def __le__(self, other: RunStatus) -> bool:
        return self._rank <= _checked(other)._rank

    def __ge__(self, other: RunStatus) -> bool:
        return self._rank >= _checked(other)._rank

    def before(self, other: RunStatus, inclusive: bool = False) -> bool:
        """Whether this status usually comes before `other` (or is it, with inclusive)."""
        return self < other or (inclusive and self == other)

    def after(self, other: RunStatus, inclusive: bool = False) -> bool:
        """Whether this status usually comes after `other` (or is it, with inclusive)."""
        return self > other or (inclusive and self == other)

    def is_terminal(self) -> bool:
        """COMPLETED, STOPPED or FAILED."""
        return self.after(RunStatus.COMPLETED, inclusive=True)

    @classmethod
    def from_string(cls, run_status: str | RunStatus) -> RunStatus:
        """The status a string names (any case, camelCase or snake_case); UNKNOWN for one it does not."""
        if isinstance(run_status, RunStatus):
            return run_status
        if not isinstance(run_status, str):
            return cls.UNKNOWN
        key = re.sub(r"(?<!^)(?=[A-Z])", "_", run_status.strip()).upper() if not run_status.isupper() else run_status
        return cls.__members__.get(key.strip().upper(), cls.UNKNOWN)

    @property
    def display_name(self) -> str:
        return self.value.title().replace("_", "")


def _checked(other: object) -> RunStatus:
    if not isinstance(other, RunStatus):
        raise TypeError(f"Cannot compare order of ``RunStatus`` and {type(other)}")
    return other


_ORDER = [
    RunStatus.UNKNOWN,
    RunStatus.PENDING,
    RunStatus.QUEUED,
    RunStatus.STARTING,
    RunStatus.RUNNING,
    RunStatus.TERMINATING,
    RunStatus.COMPLETED,
    RunStatus.STOPPED,
    RunStatus.FAILED,
]

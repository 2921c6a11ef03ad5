"""A run's status, in mcli's words: what every record (launcher.backends.base.Run) and every
capability (launcher.backends.capabilities) speaks of."""

from __future__ import annotations

import enum


class RunStatus(str, enum.Enum):
    PENDING = "PENDING"
    QUEUED = "QUEUED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    TERMINATING = "TERMINATING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    UNKNOWN = "UNKNOWN"

    @property
    def is_terminal(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.STOPPED)

    def __str__(self) -> str:
        return self.value

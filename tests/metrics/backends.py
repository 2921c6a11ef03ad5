"""Test doubles of the Backend contract for the metrics library's own tests: one whose
logs lie in a directory (like the local backend's), one that can only stream logs
(like Kubernetes). The CLI end-to-end tests use the real local backend instead."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from launcher.backends.base import Attempt, Backend, LogLine, Run, RunStatus
from launcher.backends.capabilities import Feature, LocalArtifacts, TrackerMetrics, TrackerRun
from launcher.errors import LauncherError, NotFoundError


def make_run(name: str, attempts: list[tuple[RunStatus, datetime | None]], status: RunStatus | None = None) -> Run:
    return Run(
        name=name,
        backend="test",
        status=status or attempts[-1][0],
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        spec={},
        attempts=[Attempt(index=i, status=s, started_at=at) for i, (s, at) in enumerate(attempts, start=1)],
    )


class _Base(Backend):
    name = "test"
    UNSUPPORTED = {f: "a test double" for f in Feature}

    @classmethod
    def open(cls, profile, home):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def check(self, spec):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def plan(self, spec, secrets=None, *, code=None):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def secret_store(self):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}

    def get(self, name: str) -> Run:
        if name not in self.runs:
            raise NotFoundError(f"no run {name!r}")
        return self.runs[name]

    def list(self) -> list[Run]:
        return list(self.runs.values())

    def submit(self, spec, secrets):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def watch(self, name: str, *, poll_seconds: float = 0.5) -> Iterator[Run]:
        yield self.get(name)

    def stop(self, name: str) -> Run:
        raise NotImplementedError

    def delete(self, name: str) -> None:
        raise NotImplementedError


class DirBackend(_Base, LocalArtifacts):
    """Logs at <root>/<run>/attempt-<N>/rank-<R>.log, artifacts at <root>/<run>/artifacts."""

    UNSUPPORTED = {f: "a test double" for f in Feature if f is not Feature.LOCAL_ARTIFACTS}

    def __init__(self, root: Path):
        super().__init__()
        self.root = root

    def log_file(self, name: str, rank: int, attempt: int) -> Path:
        path = self.root / name / f"attempt-{attempt}" / f"rank-{rank}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def log_path(self, name: str, rank: int, attempt: int) -> Path | None:
        path = self.root / name / f"attempt-{attempt}" / f"rank-{rank}.log"
        return path if path.exists() else None

    def artifacts_dir(self, name: str) -> Path:
        return self.root / name / "artifacts"

    def logs(self, name, *, rank=None, attempt=None, tail=None, follow=False, previous=False, cancel=None):  # type: ignore[no-untyped-def]
        raise AssertionError("a backend with local files is read from its files, not streamed")


class StreamBackend(_Base):
    """Holds each attempt's rank-0 lines in memory; counts how often logs are streamed."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: dict[tuple[str, int], list[LogLine]] = {}
        self.streamed: list[tuple[str, int]] = []
        self.gone: set[tuple[str, int]] = set()
        """Attempts whose logs can no longer be read (their pods were deleted)."""

    def logs(self, name, *, rank=None, attempt=None, tail=None, follow=False, previous=False, cancel=None):  # type: ignore[no-untyped-def]
        run = self.get(name)
        attempt = attempt or run.current_attempt
        self.streamed.append((name, attempt))
        if (name, attempt) in self.gone:
            raise LauncherError(f"the pods of attempt {attempt} are gone")
        for line in self.lines.get((name, attempt), []):
            if rank is None or line.rank == rank:
                yield line


class TrackerBackend(StreamBackend, TrackerMetrics):
    """Streams logs, and holds a tracker's runs per run name; `tracker_down` makes it unreadable."""

    UNSUPPORTED = {f: "a test double" for f in Feature if f is not Feature.TRACKER_METRICS}

    def __init__(self) -> None:
        super().__init__()
        self.tracked: dict[str, list[TrackerRun]] = {}
        self.tracker_down = False
        self.asked: list[str] = []

    def tracker_metrics(self, run: Run) -> list[TrackerRun]:
        self.asked.append(run.name)
        if self.tracker_down:
            raise LauncherError("the tracker answered 503")
        return self.tracked.get(run.name, [])

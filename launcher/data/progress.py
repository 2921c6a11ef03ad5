"""A rich progress display on stderr: documents, tokens, MB/s of text."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from launcher.data.pool import Progress

if TYPE_CHECKING:
    from rich.progress import Progress as Bar
    from rich.progress import TaskID


class RichProgress(Progress):
    """Starts on the first update, so that worker processes are forked before its thread."""

    def __init__(self, label: str):
        from rich.console import Console

        self.console = Console(stderr=True)
        self.label = label
        self._progress: Bar | None = None
        self._task: TaskID | None = None
        self._start = time.monotonic()

    def _open(self) -> None:
        from rich.progress import Progress as Bar
        from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

        progress = Bar(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TextColumn("[bold]{task.fields[documents]:>12,}[/] docs"),
            TextColumn("[bold]{task.fields[tokens]:>14,}[/] tokens"),
            TextColumn("[bold]{task.fields[mbps]:>7.2f}[/] MB/s"),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self._progress = progress
        progress.start()
        self._task = progress.add_task(self.label, documents=0, tokens=0, mbps=0.0, total=None)

    def update(self, documents: int, tokens: int, text_bytes: int) -> None:
        if not self.console.is_terminal:
            return  # no live display in logs and pipes; the summary says it all
        if self._progress is None:
            self._open()
        assert self._progress is not None and self._task is not None  # _open made them
        elapsed = max(time.monotonic() - self._start, 1e-9)
        self._progress.update(self._task, documents=documents, tokens=tokens, mbps=text_bytes / elapsed / 1e6)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

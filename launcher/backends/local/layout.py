"""Where a local run's files live under LAUNCHER_HOME/runs/<name>/."""

from __future__ import annotations

from pathlib import Path


class RunLayout:
    def __init__(self, home: Path, name: str):
        self.root = home / "runs" / name

    @property
    def spec_file(self) -> Path:
        return self.root / "spec.json"

    @property
    def plan_file(self) -> Path:
        """The run's plan (launcher.pod.plan), which every rank's entrypoint reads."""
        return self.root / "plan.json"

    @property
    def code_file(self) -> Path:
        """The run's code snapshot (launcher.pod.code_archive), which every rank unpacks."""
        return self.root / "code.tar.gz"

    @property
    def config_dir(self) -> Path:
        return self.root / "config"

    @property
    def private(self) -> Path:
        """File secrets, mode 0700; removed when the run ends."""
        return self.root / "private"

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def supervisor_log(self) -> Path:
        return self.root / "supervisor.log"

    def attempt_dir(self, attempt: int) -> Path:
        return self.root / f"attempt-{attempt}"

    def log_file(self, attempt: int, rank: int) -> Path:
        return self.attempt_dir(attempt) / f"rank-{rank}.log"

    def exit_file(self, attempt: int, rank: int) -> Path:
        """The rank's outcome, written by its entrypoint when it ends."""
        return self.attempt_dir(attempt) / f"rank-{rank}.exit.json"

    def progress_file(self, attempt: int, rank: int) -> Path:
        """The rank's progress and step time, rewritten by its entrypoint as it runs (contract.PROGRESS_FILE)."""
        return self.attempt_dir(attempt) / f"rank-{rank}.progress.json"

    def exec_record(self, rank: int) -> Path:
        """The rank's command environment, working directory and pid, as its entrypoint
        wrote them for `launcher exec` (contract.EXEC_RECORD); private, gone with the run."""
        return self.private / f"rank-{rank}.exec.json"

    @property
    def outcome_file(self) -> Path:
        """The run's outcome, written by its supervisor only when the state database
        cannot be written (a full disk); its space is taken when the supervisor starts."""
        return self.root / "outcome.json"

    @property
    def owner(self) -> str:
        """The token every process of the run inherits (contract.OWNER): unique per
        LAUNCHER_HOME and run name, so the run's processes are found even without
        their supervisor."""
        return str(self.root)

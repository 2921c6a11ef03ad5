"""One detached process per local run: it starts the ranks, records what happens to
them, restarts the whole group on failure as the run's RetryPolicy allows (up to max_retries,
each retry after the policy's backoff, the run PENDING meanwhile), and ends the run.

Started by `LocalBackend.submit` in a new session, so it outlives the CLI and a
Ctrl-C in the user's terminal. Its environment already holds the run's secret
values (never its arguments); the ranks inherit them.

It owns every process of its ranks: it is a child subreaper, so a command whose
entrypoint died (or that escaped its session) is handed to it, and when an
attempt ends, whatever is still alive below it is killed before the next attempt
starts or the run ends. A rank that cannot be started ends the attempt the same
way. Each entrypoint writes its outcome to an exit file, which says why a rank
failed when its exit code alone cannot (a full disk).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from launcher.backends.base import RunStatus
from launcher.backends.goodput import attempt_progress
from launcher.backends.local.layout import RunLayout
from launcher.backends.local.mounts import create_mount_points, rank_launch, remove_mount_points
from launcher.backends.local.procs import free_port, start_time, terminate_groups
from launcher.backends.local.state import State
from launcher.errors import StateFileError
from launcher.pod import contract, reaper, stragglers
from launcher.pod.failures import Failure, classify, most_telling
from launcher.pod.reserved import ReservedFile, read_reserved
from launcher.spec.retry import DEADLINE, RetryPolicy, retry_class

# The end of a failed rank's log that is searched for evidence of its failure class (the
# entrypoint also keeps the first evidence line of each class, however early it came).
LOG_TAIL_BYTES = 64 * 1024

# The entrypoint passes a stop to its command's process group and escalates to SIGKILL
# after GRACE_SECONDS; the supervisor waits a little longer before it SIGKILLs the
# entrypoint, so the command is never left running without its entrypoint.
GRACE_SECONDS = float(os.environ.get(contract.GRACE_SECONDS, "10"))
KILL_AFTER = GRACE_SECONDS + 5


class Supervisor:
    def __init__(self, home: Path, name: str):
        self.home = home
        self.name = name
        self.state = State(home)
        self.layout = RunLayout(home, name)
        row = self.state.row(name)
        if row is None:
            raise SystemExit(f"no run {name}")
        self.spec = json.loads(row["spec"])
        self.workdir = row["workdir"]
        self.stop = threading.Event()
        self.attempt = row["attempt"]
        self.known: tuple[RunStatus, str | None, int | None] | None = None
        """The outcome of the attempt that just ended, once it is known."""
        self.failure: Failure | None = None
        """How the attempt that just ended failed (launcher.pod.failures), where it did."""
        self.started = time.monotonic()
        self.scheduling: dict = {}
        self.policy = RetryPolicy()
        self.deadline: float | None = None
        """When max_duration runs out (monotonic), counted from this supervisor's start."""
        self._limits(self.spec)

    def _limits(self, spec: dict) -> None:
        self.scheduling = spec.get("scheduling") or {}
        self.policy = RetryPolicy.from_scheduling(self.scheduling)
        hours = self.scheduling.get("max_duration")
        self.deadline = self.started + float(hours) * 3600 if hours else None

    def reload(self) -> None:
        """The run's scheduling as the state has it now: `update run` changes max_duration and
        max_retries of a running run there, and this process acts on them within a second."""
        try:
            row = self.state.row(self.name)
        except StateFileError:
            return  # unreadable for now: the limits stay as they were
        if row is not None:
            self._limits(json.loads(row["spec"]))

    def _past_deadline(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _deadline_reason(self) -> str:
        return f"exceeded max_duration of {self.scheduling.get('max_duration')}h"

    def _on_signal(self, signum, _frame) -> None:
        self.stop.set()

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        reaper.become_subreaper()
        # Taken first, while the disk may still have room: only used if the state cannot be written.
        outcome_file = ReservedFile(str(self.layout.outcome_file))
        written = False
        # How each attempt of this supervisor failed: a restart (`run -r`) starts a new
        # supervisor, and the retry budget counts afresh from it.
        failed: list[str] = []
        try:
            self.state.set_supervisor(self.name, os.getpid(), start_time(os.getpid()))
            try:
                create_mount_points(self.layout.root)
            except OSError:
                pass  # each rank's own mount then fails, and says why in its log
            while True:
                self.known = None
                self.failure = None
                status, reason, code = self.known = self._attempt()
                self.reload()
                # The failure's class (a bad GPU, a broken collective, a hang: the system's;
                # the program's own or out of memory: the user's) decides how it is counted;
                # past the deadline nothing is retried; a stop never fails.
                failure = DEADLINE if self._past_deadline() else retry_class(self.failure and self.failure.kind)
                if status is RunStatus.FAILED and not self.stop.is_set() and self.policy.allows(failed, failure):
                    failed.append(failure)
                    # The run waits PENDING for its backoff; a stop or the deadline may end it meanwhile.
                    delay = self.policy.delay(self.attempt)
                    self.state.await_retry(self.name, reason, delay)
                    due = time.monotonic() + delay
                    while not self.stop.is_set() and not self._past_deadline() and time.monotonic() < due:
                        deadline = self.deadline if self.deadline is not None else due
                        if self.stop.wait(max(0.0, min(due, deadline, time.monotonic() + 1.0) - time.monotonic())):
                            break
                        self.reload()  # an update may move the deadline while the retry waits
                    if self.stop.is_set():
                        self.state.set_status(self.name, RunStatus.STOPPED, "stopped by the user")
                        return
                    if self._past_deadline():
                        self.state.set_status(self.name, RunStatus.FAILED, self._deadline_reason(), exit_code=code)
                        return
                    self.attempt = self.state.new_attempt(self.name)
                    continue
                self.state.set_status(self.name, status, reason, exit_code=code)
                return
        except StateFileError as e:
            # The state database cannot be written (a full disk): the outcome goes to the
            # file reserved for it, where a reader finds it once this process has gone.
            status, reason, code = self.known or (
                RunStatus.FAILED,
                f"the run's state could not be written: {e.message}",
                None,
            )
            if (
                outcome_file.write(
                    {"status": status.value, "reason": reason, "exit_code": code, "state_error": e.message}
                )
                is not None
            ):
                raise
            written = True
        except Exception as e:
            self.state.set_status(self.name, RunStatus.FAILED, f"supervisor error: {type(e).__name__}: {e}")
            raise
        finally:
            self._sweep()
            # File secrets, and the mount points made for them, live only as long as the run.
            shutil.rmtree(self.layout.private, ignore_errors=True)
            remove_mount_points(self.layout.root)
            if not written:
                outcome_file.discard()

    def _sweep(self) -> None:
        """Kill and reap every process left below the supervisor (all of them belong to
        ranks whose entrypoint has exited, or died), and every one `launcher exec` started."""
        me = os.getpid()
        reaper.kill_all(lambda: reaper.descendants(me), reap=True)
        # What `launcher exec` started in the ranks is not below this process, yet it has the
        # run's environment (its OWNER token): a command left in the background, a tmux server.
        reaper.kill_all(lambda: reaper.owned_by(self.layout.owner, contract.OWNER), reap=False)

    def _rank_env(self, rank: int, nodes: int, port: int) -> dict[str, str]:
        env = dict(os.environ)
        if self.layout.plan_file.exists():  # a run submitted by an older launcher has only its spec
            env[contract.PLAN] = str(self.layout.plan_file)
        env.update(
            {
                contract.SPEC: str(self.layout.spec_file),
                contract.BACKEND: "local",
                contract.ON_HOST: "1",
                contract.CONFIG_DIR: str(self.layout.config_dir),
                contract.WORKDIR: self.workdir,
                contract.NODES: str(nodes),
                contract.VENV: str(self.layout.venv),
                contract.ARTIFACTS_DIR: str(self.layout.artifacts),
                "NODE_RANK": str(rank),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                contract.ATTEMPT: str(self.attempt),
                contract.GRACE_SECONDS: str(GRACE_SECONDS),
                contract.EXIT_FILE: str(self.layout.exit_file(self.attempt, rank)),
                contract.EXEC_RECORD: str(self.layout.exec_record(rank)),
                contract.PROGRESS_FILE: str(self.layout.progress_file(self.attempt, rank)),
                contract.OWNER: self.layout.owner,
            }
        )
        return env

    def _attempt(self) -> tuple[RunStatus, str | None, int | None]:
        nodes = int((self.spec.get("compute") or {}).get("nodes") or 1)
        attempt = self.attempt
        self.state.set_status(self.name, RunStatus.STARTING)
        adir = self.layout.attempt_dir(attempt)
        adir.mkdir(parents=True, exist_ok=True)
        self.layout.private.mkdir(mode=0o700, exist_ok=True)
        for rank in range(nodes):  # the last attempt's: exec waits for this attempt's own
            self.layout.exec_record(rank).unlink(missing_ok=True)
        self.layout.artifacts.mkdir(parents=True, exist_ok=True)
        port = free_port()
        procs: dict[int, subprocess.Popen] = {}
        for rank in range(nodes):
            try:
                self.layout.exit_file(attempt, rank).unlink(missing_ok=True)
                launch = rank_launch(
                    self.layout.root, [sys.executable, "-m", "launcher.entrypoint"], self._rank_env(rank, nodes, port)
                )
                with open(self.layout.log_file(attempt, rank), "ab") as log:
                    if launch.note:
                        log.write(f"[launcher] {launch.note}\n".encode())
                        log.flush()
                    p = subprocess.Popen(
                        launch.argv,
                        cwd=self.workdir,
                        env=launch.env,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
            except OSError as e:
                return self._failed_start(attempt, rank, procs, e)
            procs[rank] = p
            self.state.set_rank(self.name, attempt, rank, RunStatus.RUNNING, pid=p.pid, pid_started=start_time(p.pid))
        self.state.set_status(self.name, RunStatus.RUNNING)

        codes: dict[int, int] = {}
        first_failure: tuple[int, int] | None = None
        ending: tuple[RunStatus, str | None] | None = None
        reload_at = time.monotonic() + 1.0
        stragglers: set[int] = set()
        while len(codes) < len(procs):
            if time.monotonic() >= reload_at:
                self.reload()
                self._name_stragglers(attempt, sorted(procs), stragglers)
                reload_at = time.monotonic() + 1.0
            for rank, p in procs.items():
                if rank in codes:
                    continue
                code = p.poll()
                if code is None:
                    continue
                code = code if code >= 0 else 128 - code
                codes[rank] = code
                if code != 0 and first_failure is None and ending is None:
                    first_failure = (rank, code)
            if ending is None:
                # A stop or the deadline ends the ranks on the launcher's word (TERMINATING
                # meanwhile); a failed rank ends the others because the group cannot go on.
                by_launcher = True
                if self.stop.is_set():
                    ending = (RunStatus.STOPPED, "stopped by the user")
                elif self._past_deadline():
                    ending = (RunStatus.FAILED, self._deadline_reason())
                elif first_failure is not None:
                    rank, code = first_failure
                    ending = (RunStatus.FAILED, f"rank {rank} exited with code {code}")
                    by_launcher = False
                if ending is not None and len(codes) < len(procs):
                    if by_launcher:
                        self.state.set_status(self.name, RunStatus.TERMINATING, ending[1])
                    live = [p.pid for r, p in procs.items() if r not in codes]
                    threading.Thread(target=terminate_groups, args=(live, KILL_AFTER), daemon=True).start()
            time.sleep(0.1)

        self._sweep()
        outcomes = {rank: read_exit_file(self.layout.exit_file(attempt, rank)) for rank in codes}
        if ending is None:
            self.known = RunStatus.COMPLETED, None, 0
        else:
            status, reason = ending
            # A rank that could not write its log says why; its exit code alone cannot.
            why = next((o["reason"] for o in outcomes.values() if o.get("reason")), None)
            self.known = (
                status,
                why if why and status is RunStatus.FAILED else reason,
                first_failure[1] if first_failure else None,
            )
        self._record_outcome(attempt, codes, outcomes, failed=ending is not None and ending[0] is RunStatus.FAILED)
        for rank, code in codes.items():
            if ending and ending[0] is RunStatus.STOPPED:
                st = RunStatus.STOPPED
            else:
                st = RunStatus.COMPLETED if code == 0 else RunStatus.FAILED
            self.state.set_rank(self.name, attempt, rank, st, exit_code=code, reason=outcomes[rank].get("reason"))
        return self.known

    def _name_stragglers(self, attempt: int, ranks: list[int], named: set[int]) -> None:
        """Name, once, each straggler (launcher.pod.stragglers) of the ranks' progress files,
        in its log and the attempt's record."""
        factor = float((self.spec.get("resilience") or {}).get("straggler_factor") or 2.0)
        times: dict[int, float] = {}
        for rank in ranks:  # a rank that ended keeps its last step time
            try:
                seconds = stragglers.timed(json.loads(self.layout.progress_file(attempt, rank).read_text()))
            except (OSError, ValueError):
                continue
            if seconds is not None:
                times[rank] = seconds
        for slow in stragglers.stragglers(times, factor):
            rank = slow.rank
            if rank not in named:
                named.add(rank)
                line = stragglers.line(slow, "localhost", factor)
                try:
                    with open(self.layout.log_file(attempt, rank), "a") as log:
                        log.write(f"[launcher] {line}\n")
                except OSError:
                    pass
                self.state.add_straggler(self.name, attempt, line)

    def _record_outcome(self, attempt: int, codes: dict[int, int], outcomes: dict[int, dict], *, failed: bool) -> None:
        """Record how the attempt ended: for a failed one, the most telling class among its
        failed ranks, from each one's exit code, its exit file (the evidence its entrypoint
        kept) and its log's end; for any, the last progress and the setup time its ranks report."""
        found = []
        for rank, code in sorted(codes.items()) if failed else ():
            if code == 0:
                continue
            outcome = outcomes.get(rank) or {}
            evidence = outcome.get("evidence")
            lines = [v for v in evidence.values() if isinstance(v, str)] if isinstance(evidence, dict) else []
            lines += _log_tail(self.layout.log_file(attempt, rank))
            f = classify(code, outcome.get("reason"), lines)
            found.append(
                Failure(f.kind, f"rank {rank}: {f.evidence}" if f.evidence else f"rank {rank}: exit code {code}")
            )
        self.failure = most_telling(found)
        # Each exit file: {"setup", "progress": {"step", "age"}, "resumed"} (launcher.entrypoint.main).
        reported = [
            {
                **(o["progress"] if isinstance(o.get("progress"), dict) else {}),
                "setup": o.get("setup"),
                "resumed": o.get("resumed"),
            }
            for _, o in sorted(outcomes.items())
        ]
        self.state.set_attempt_outcome(
            self.name,
            attempt,
            failure_class=self.failure.kind if self.failure else None,
            evidence=self.failure.evidence if self.failure else None,
            **attempt_progress(reported),
        )

    def _failed_start(
        self, attempt: int, rank: int, started: dict[int, subprocess.Popen], error: OSError
    ) -> tuple[RunStatus, str, None]:
        """Rank `rank` cannot start: the ranks already started cannot go on without it."""
        why = f"could not start rank {rank}: {error.strerror or error}" + (
            f": {error.filename}" if getattr(error, "filename", None) else ""
        )
        terminate_groups([p.pid for p in started.values()], KILL_AFTER)
        for r, p in started.items():
            code = p.wait()
            self.state.set_rank(
                self.name,
                attempt,
                r,
                RunStatus.FAILED,
                exit_code=code if code >= 0 else 128 - code,
                reason=f"stopped: {why}",
            )
        self._sweep()
        self.state.set_rank(self.name, attempt, rank, RunStatus.FAILED, reason=why)
        return RunStatus.FAILED, why, None


def _log_tail(path: Path) -> list[str]:
    """The last lines of a rank's log (already masked by its entrypoint)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
            return f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []


def read_exit_file(path: Path) -> dict:
    """A rank's outcome as its entrypoint wrote it; {} when there is none (it died)."""
    data = read_reserved(path)
    return data if isinstance(data.get("exit_code"), int) else {}


def read_outcome_file(path: Path) -> tuple[RunStatus, str | None, int | None] | None:
    """The run's outcome (status, reason, exit code) as its supervisor wrote it when the
    state could not be written; None without one."""
    data = read_reserved(path)
    try:
        status = RunStatus(data.get("status"))
    except ValueError:
        return None
    reason, code = data.get("reason"), data.get("exit_code")
    return status, reason if isinstance(reason, str) else None, code if isinstance(code, int) else None


def main() -> None:
    home = Path(os.environ["LAUNCHER_HOME"])
    Supervisor(home, sys.argv[1]).run()


if __name__ == "__main__":
    main()

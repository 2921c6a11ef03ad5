"""The embedded local backend: runs execute on this machine as detached processes.

Each run has a supervisor process (launcher.backends.local.supervisor) and one
entrypoint process per node rank. State is in SQLite; logs, the spec and the
parameters are files under LAUNCHER_HOME/runs/<name>/.
"""

from __future__ import annotations

import builtins
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from launcher.backends.base import Backend, LogLine, Plan, Run, RunStatus
from launcher.backends.capabilities import (
    CodeSnapshots,
    Exec,
    Feature,
    GpuUsage,
    GpuUsageReport,
    LocalArtifacts,
    PortForward,
    Restartable,
    Updatable,
)
from launcher.backends.local.layout import RunLayout
from launcher.backends.local.procs import alive, start_time, terminate_groups
from launcher.errors import FieldError, InputError, LauncherError, NotFoundError, StateFileError
from launcher.pod import contract
from launcher.pod.limits import arg_max_here
from launcher.pod.packages import ALLOW_HOST_PACKAGES_SETTING, host_packages_refusal
from launcher.secrets.kinds import PUBLIC_ENV, Secret, project
from launcher.secrets.mask import Masker
from launcher.secrets.store import LocalSecretStore

if TYPE_CHECKING:
    import sqlite3

    from launcher.backends.listing import RunQuery
    from launcher.backends.local.mounts import MountPlan
    from launcher.backends.local.profile import LocalProfile
    from launcher.backends.local.state import State
    from launcher.pod import code_archive

# What only a submit, a run's logs or its clean-up use (the snapshot packer, the mount plan
# and its namespaces, the log readers, the plan renderer, subprocess, the reaper and ctypes)
# is imported there, and the state DB is opened at first use, so that `validate`, which
# opens this backend to check a spec, loads none of it and writes nothing.

# Node ranks are processes on this machine; past a few per core they only compete.
NODES_PER_CORE = 4


def max_local_nodes() -> int:
    return NODES_PER_CORE * (os.cpu_count() or 1)


def unhonoured(spec) -> list[str]:
    """The fields a run on this machine cannot honour, as named warnings (never dropped in silence)."""
    from launcher.spec.models import AUTO_PRIORITY  # loaded with the spec; a listing needs neither

    c, s = spec.compute, spec.scheduling
    fields = {
        "compute.instance": c.instance,
        "compute.node_names": c.node_names,
        "compute.cpus": c.cpus,
        "compute.memory": c.memory,
        "compute.topology": c.topology,
        "scheduling.preemptible": s.preemptible,
        # auto (mcli's default) asks for nothing beyond the default: nothing is ignored.
        "scheduling.priority": s.priority if s.priority != AUTO_PRIORITY else None,
    }
    out = [
        f"{field}: ignored by the local backend (this machine runs every rank)"
        for field, value in fields.items()
        if value is not None
    ]
    if spec.resilience is not None and spec.resilience.exclude_faulty_nodes:
        out.append(
            "resilience.exclude_faulty_nodes: the local backend has one node (this machine): "
            "a retry after a hardware failure runs on it again, and a straggler is named but never "
            "treated as a fault of its node (resilience.straggler_grace)"
        )
    return out


def visible_gpus() -> int:
    """GPUs this machine can give a local run (0 without an NVIDIA driver)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        return len([d for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip() and d.strip() != "-1"])
    return len(gpu_names())


def gpu_names() -> list[str]:
    """The product name of each GPU nvidia-smi sees ("NVIDIA H100 80GB HBM3"); none without it."""
    if not shutil.which("nvidia-smi"):
        return []
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


class LocalBackend(Backend, Restartable, Updatable, Exec, PortForward, GpuUsageReport, CodeSnapshots, LocalArtifacts):
    name = "local"
    # The supervisor reads max_duration and max_retries from the state every second.
    UNSUPPORTED = {
        Feature.UPDATE_PRIORITY: "there are no priorities on this machine (every rank runs at once; "
        "scheduling.priority is ignored here)",
        Feature.QUEUE_USAGE: "nothing queues runs on this machine",
        Feature.ON_DEMAND_COMPUTE: "its runs use this machine; none is made for them",
        Feature.CLUSTER_PROBE: "it runs on this machine, not a cluster",
        Feature.IMAGE_PROBE: "it runs with this machine's Python environment and pulls no images",
        Feature.SECRETS_IN_CLUSTER: "its secrets live on this machine ($LAUNCHER_HOME/secrets)",
        Feature.TRACKER_METRICS: "its trainers' metrics.jsonl and logs are on this machine; no tracker is read",
    }

    def __init__(self, home: Path, settings: dict | None = None):
        self.home = home
        self.settings = settings or {}

    @cached_property
    def state(self) -> State:
        """The runs' records (state.db), opened and created at first use: validate and a
        dry-run, which open this backend to check a spec, never touch them."""
        from launcher.backends.local.state import State

        state = State(self.home)
        self._sweep_interrupted(state)
        return state

    def _sweep_interrupted(self, state: State) -> None:
        """Remove what a submit killed before it recorded its run left: runs/<name>/ (a
        snapshot copy in it) whose SUBMITTER_FILE names a dead process and that has no
        record. The submitter is looked at before the record: once it is dead it records
        nothing more, so a directory without a record then is nobody's. A directory without
        the file is a recorded run's, and stays though state.db forgets it (moved away as
        corrupt: its logs are kept)."""
        from launcher.backends.local.mounts import remove_mount_points

        try:
            entries = [e for e in os.scandir(self.home / "runs") if e.is_dir(follow_symlinks=False)]
        except OSError:
            return  # none yet, or a home this process only reads
        submitters = [Path(e.path) for e in entries if os.path.exists(os.path.join(e.path, SUBMITTER_FILE))]
        for root in submitters:
            if _submitter_alive(root):
                continue
            if state.row(root.name) is not None:  # killed after it recorded the run
                (root / SUBMITTER_FILE).unlink(missing_ok=True)
                continue
            remove_mount_points(root)
            shutil.rmtree(root, ignore_errors=True)

    @classmethod
    def open(cls, profile: LocalProfile, home: Path) -> LocalBackend:
        """`profile`: the profile validated as a LocalProfile (registry.open_backend)."""
        return cls(home, profile.model_dump(exclude={"name", "backend"}))

    def secret_store(self) -> LocalSecretStore:
        return LocalSecretStore(self.home)

    def check(self, spec) -> list[str]:
        """What this machine refuses to run, before anything is created: a gpu_type the
        shipped table does not know, GPUs that do not split over the nodes, more nodes than
        it runs, apt_packages it may not install. Returns what it ignores (unhonoured)."""
        c = spec.compute
        if c.gpu_type is not None:
            # The names a cluster would take (the shipped gpu_types), so a spec valid here is valid there.
            from launcher.backends.gpus import resolve_placement, shipped_gpu_types

            resolve_placement(spec, shipped_gpu_types())
        elif c.gpus and c.nodes and c.gpus % c.nodes:
            raise InputError(f"compute: {c.gpus} GPUs do not split evenly over {c.nodes} nodes")
        cap = max_local_nodes()
        if spec.nodes > cap:
            raise FieldError(
                "compute.nodes",
                f"{spec.nodes} is more than the local backend runs on this machine: at most "
                f"{cap} ({NODES_PER_CORE} per CPU core, {os.cpu_count() or 1} cores); each node is a process here",
                hint="use fewer nodes, or a Kubernetes cluster (--cluster)",
            )
        from launcher.spec.models import AptPackagesIntegration

        apt = [i for i in spec.integrations if isinstance(i, AptPackagesIntegration)]
        if apt and self.settings.get(ALLOW_HOST_PACKAGES_SETTING) is not True:
            raise FieldError(
                f"integrations.{spec.integrations.index(apt[0])}",
                host_packages_refusal([p for i in apt for p in i.packages]),
            )
        self.check_exec(spec, [])
        return unhonoured(spec)

    def rank_exec_limits(self) -> tuple[dict[str, str], int]:
        """A local rank inherits this process's environment (submit passes it on), under its stack limit."""
        return dict(os.environ), arg_max_here()

    def plan(self, spec, secrets: list[Secret] | None = None, *, code: code_archive.Snapshot | None = None) -> Plan:
        """The run as it would start here; secrets by reference only."""
        if secrets is None:
            secrets = LocalSecretStore(self.home).for_run(spec.secrets)
        env = spec.env_for_run(spec.name)
        for s in secrets:
            proj = project(s)
            for var in proj.env:
                env[var] = f"<from secret {s.name}>"
            for var in proj.plain_env:
                env[var] = f"<path into secret {s.name}>"
        document = {
            "backend": "local",
            "run": spec.to_submitted(),
            "environment": env,
            "secrets": [{"name": s.name, "kind": s.kind.value} for s in secrets],
        }
        if code is not None:
            document["code"] = code.record()
        return Plan(document, unhonoured(spec))

    # ------------------------------------------------------------ submit

    def code_limit(self) -> int:
        from launcher.pod import code_archive

        return code_archive.DEFAULT_LIMIT

    def submit(
        self, spec, secrets: list[Secret], *, workdir: str | None = None, code: code_archive.Snapshot | None = None
    ) -> Run:
        warnings = self.check(spec)
        self.check_secrets(spec, secrets)
        name = spec.name
        layout = RunLayout(self.home, name)
        if self.state.row(name) is not None or layout.root.exists():
            raise InputError(f"a run named {name!r} already exists")
        layout.root.mkdir(parents=True, mode=0o700)
        # Until the record is written, a killed submit's directory is swept (_sweep_interrupted).
        me = os.getpid()
        (layout.root / SUBMITTER_FILE).write_text(f"{me} {start_time(me) or ''}")
        submitted = spec.to_submitted()
        layout.spec_file.write_text(json.dumps(submitted, indent=1))
        code_plan = None
        if code is not None:  # the ranks read it from the run's directory
            layout.code_file.write_bytes(code.data)
            code_plan = {"digest": code.digest, "size": code.size, "file": str(layout.code_file)}
        from launcher.spec.plan import plan_text

        layout.plan_file.write_text(plan_text(spec, code=code_plan))
        layout.config_dir.mkdir()
        # As in mcli (and on Kubernetes): the full submitted config beside parameters.yaml.
        (layout.config_dir / "run_config.yaml").write_text(yaml.safe_dump(submitted, sort_keys=False))
        env = self._supervisor_env(submitted, secrets, layout)
        self.state.insert_run(name, submitted, [s.name for s in secrets], workdir or self._workdir(spec, layout))
        (layout.root / SUBMITTER_FILE).unlink(missing_ok=True)
        self._start_supervisor(name, layout, env)
        run = self.get(name)
        run.warnings = warnings
        return run

    def _supervisor_env(self, submitted: dict, secrets: list[Secret], layout: RunLayout) -> dict[str, str]:
        """The environment of a run's supervisor and ranks (values of its secrets included, its
        file secrets written into its private directory): for a submit, and again for a restart."""
        env = dict(os.environ)
        env["LAUNCHER_HOME"] = str(self.home)
        from launcher.backends.local.mounts import PLAN_FILE, plan_mounts

        env[contract.OWNER] = layout.owner
        if self.settings.get(ALLOW_HOST_PACKAGES_SETTING) is True:
            env[contract.ALLOW_HOST_PACKAGES] = "1"
        # The store's directory is covered in every rank's mount namespace: a run reads the
        # secrets it was given (below), never the store.
        mounts = plan_mounts(
            layout.config_dir,
            {p.mount_path: layout.private / s.name for s in secrets if (p := project(s)).files and p.mount_path},
            hidden=[LocalSecretStore(self.home).ensure_dir()],
        )
        mounts.save(layout.root / PLAN_FILE)
        env.update(self._secret_env(secrets, layout, mounts))
        compute = submitted.get("compute") or {}
        nodes = int(compute.get("nodes") or 1)
        wanted = int(compute.get("gpus") or 0) // nodes
        env[contract.GPUS_PER_NODE] = str(min(wanted, visible_gpus()))
        return env

    def _start_supervisor(self, name: str, layout: RunLayout, env: dict[str, str]) -> None:
        import subprocess

        try:
            sup = subprocess.Popen(
                [sys.executable, "-m", "launcher.backends.local.supervisor", name],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=open(layout.supervisor_log, "ab"),
                stderr=subprocess.STDOUT,
                start_new_session=True,  # survives the CLI and its Ctrl-C
                close_fds=True,
            )
        except OSError as e:
            self.state.set_status(name, RunStatus.FAILED, f"could not start the run's supervisor: {e}")
            raise LauncherError(f"could not start run {name}: {e}") from None
        self.state.set_supervisor(name, sup.pid, start_time(sup.pid))

    def restart(self, name: str) -> Run:
        """Attempt N+1 of a stopped or failed run, by a new supervisor: the spec and the secrets
        the run was submitted with (their values as stored now), in the same workdir."""
        run = self.get(name)
        self.refuse_restart(run)
        row = self._row(name)
        submitted = json.loads(row["spec"])
        secrets = LocalSecretStore(self.home).for_run(json.loads(row["secrets"]))
        layout = RunLayout(self.home, name)
        if self.state.restart(name) is None:  # it changed since we looked
            self.refuse_restart(self.get(name))
            raise InputError(f"run {name} cannot be restarted now")
        try:
            shutil.rmtree(layout.private, ignore_errors=True)  # the last supervisor's, if it left any
            env = self._supervisor_env(submitted, secrets, layout)
        except OSError as e:
            self.state.set_status(name, RunStatus.FAILED, f"could not restart the run: {e}")
            raise LauncherError(f"could not restart run {name}: {e}") from None
        self._start_supervisor(name, layout, env)
        return self.get(name)

    def update(
        self,
        name: str,
        *,
        max_duration: float | None = None,
        priority: str | None = None,
        max_retries: int | None = None,
    ) -> Run:
        changes = {
            k: v
            for k, v in (("max_duration", max_duration), ("priority", priority), ("max_retries", max_retries))
            if v is not None
        }
        run = self.get(name)
        self.refuse_update(run, changes)
        if not self.state.update_scheduling(name, changes):
            self.refuse_update(self.get(name), changes)  # it ended meanwhile: say so
        return self.get(name)

    @staticmethod
    def _workdir(spec, layout: RunLayout) -> str:
        """Where the command runs. A spec that clones code or ships a snapshot gets a fresh
        directory of its own, as a container would, so two runs never unpack into the same
        place (nor over the tree the snapshot was packed from); otherwise the
        directory `launcher run` was started from, so relative paths in the spec work."""
        from launcher.spec.models import GitRepoIntegration

        if spec.code is not None or any(isinstance(i, GitRepoIntegration) for i in spec.integrations):
            work = layout.root / "work"
            work.mkdir(exist_ok=True)
            return str(work)
        return os.getcwd()

    def _secret_env(self, secrets: list[Secret], layout: RunLayout, mounts: MountPlan) -> dict[str, str]:
        """Secret values as environment for the supervisor and ranks; file secrets written
        0400 into the run's private directory (which the ranks see at the secret's mount
        path when they get a private mount namespace). Nothing here reaches argv or the state DB."""
        env: dict[str, str] = {}
        mask_env: list[str] = []
        mask_files: list[str] = []
        for s in secrets:
            proj = project(s)
            for var, key in proj.env.items():
                env[var] = s.data[key]
                if var not in PUBLIC_ENV:
                    mask_env.append(var)
            mount = layout.private / s.name
            if proj.files:
                layout.private.mkdir(mode=0o700, exist_ok=True)
                mount.mkdir(mode=0o700, exist_ok=True)
                for fname, key in proj.files.items():
                    path = mount / fname
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
                    with os.fdopen(fd, "w") as f:
                        f.write(s.data[key])
                    mask_files.append(str(path))
            for var, template in proj.plain_env.items():
                env[var] = template.replace("{mount}", mounts.seen_as(str(mount)))
        env[contract.MASK_ENV] = ",".join(mask_env)
        env[contract.MASK_FILES] = os.pathsep.join(mask_files)
        return env

    # ------------------------------------------------------------ read

    def gpu_usage(self) -> list[GpuUsage]:
        """This machine's GPUs (nvidia-smi; CUDA_VISIBLE_DEVICES limits them) and what its
        unfinished runs ask for; one "none" entry on a machine without GPUs."""
        from launcher.backends.gpus import CPU_TYPE

        count = visible_gpus()
        if not count:
            return [GpuUsage(gpu_type=CPU_TYPE, nodes=1, gpus=0, used=0)]
        names = gpu_names()
        # nvidia-smi names every GPU of the machine; a local run gets the first `count` of them.
        product = (names[0] if len(set(names[:count])) == 1 else "mixed") if names else "unknown"
        used = sum((r.spec.get("compute") or {}).get("gpus") or 0 for r in self.list() if not r.status.is_terminal)
        return [GpuUsage(gpu_type=product, nodes=1, gpus=count, used=min(used, count))]

    def get(self, name: str) -> Run:
        unwritten = self._reconcile(name)
        run = self.state.load(name)
        if run is None:
            raise _not_found(name)
        return _with(run, unwritten)

    def _row(self, name: str) -> sqlite3.Row:
        """The run's state row, for a run just seen: one deleted meanwhile is not found."""
        row = self.state.row(name)
        if row is None:
            raise _not_found(name)
        return row

    def list(self, query: RunQuery | None = None) -> list[Run]:
        """The runs `query` wants, newest first, read a page of the state's created_at index
        at a time (State.page, which takes the statuses, names and times) and loaded only
        where the rest of the query (globs, spec names, GPUs) keeps them; it stops once
        `query.wanted` runs are found. A run whose supervisor died unseen is brought up to
        date before the pages are read, so that a status filter sees its outcome."""
        from launcher.backends.listing import RunQuery
        from launcher.backends.local.state import PAGE_ROWS

        query = query or RunQuery()
        unwritten = {name: self._reconcile(name) for name in self.state.active_names()}
        out: list[Run] = []
        below: tuple[str, str] | None = None
        # The first page is the size asked for (most listings end there), each next one twice the last.
        size = max(query.wanted or PAGE_ROWS, 1)
        while not query.full(len(out)):
            rows = self.state.page(
                below=below,
                statuses=query.statuses,
                ids=query.ids,
                before=query.before,
                after=query.after,
                rows=size,
            )
            for row in rows:
                if not query.matches_name(row["name"]) or not query.matches_spec(json.loads(row["spec"])):
                    continue
                run = self.state.load(row["name"])
                if run is not None:
                    run = _with(run, unwritten.get(run.name))
                    if query.matches(run):
                        out.append(run)
                        if query.full(len(out)):
                            break
            if len(rows) < size:
                break
            below = (rows[-1]["created_at"], rows[-1]["name"])
            size = min(size * 2, PAGE_ROWS)
        return out

    def _reconcile(self, name: str) -> _Unwritten | None:
        """A run whose supervisor died while nobody watched ends with what its ranks' exit
        files say (a command that exited 0 is COMPLETED); a rank without one was killed
        or is stopped now, and every process of the run left behind is killed. A supervisor
        that could not write the state (a full disk) left the outcome in its outcome file.
        When the outcome cannot be written now either, it is returned, to be shown as it is."""
        row = self.state.row(name)
        if row is None or RunStatus(row["status"]).is_terminal:
            return None
        if row["supervisor_pid"] is None:
            # Submitted a moment ago; the supervisor pid is recorded right after spawning.
            if _age(row["created_at"]) < 30:
                return None
        elif alive(row["supervisor_pid"], row["supervisor_started"]):
            return None
        from launcher.backends.local.supervisor import read_exit_file, read_outcome_file

        layout = RunLayout(self.home, name)
        self._kill_leftovers(name, layout)
        attempt = row["attempt"]
        stopped = bool(row["stop_requested"])
        failed: list[str] = []
        ranks: list[tuple[int, RunStatus, int | None, str | None]] = []
        for rank in range(int((json.loads(row["spec"]).get("compute") or {}).get("nodes") or 1)):
            outcome = read_exit_file(layout.exit_file(attempt, rank))
            if outcome:
                code = outcome["exit_code"]
                if code:
                    failed.append(outcome.get("reason") or f"rank {rank} exited with code {code}")
                ranks.append(
                    (rank, RunStatus.COMPLETED if code == 0 else RunStatus.FAILED, code, outcome.get("reason"))
                )
            else:
                why = "stopped by the user" if stopped else "its supervisor died before it ended; stopped"
                ranks.append((rank, RunStatus.STOPPED if stopped else RunStatus.FAILED, None, why))
                failed.append(f"rank {rank}: {why}")
        recorded = read_outcome_file(layout.outcome_file)
        if recorded is not None:  # the run's own outcome: its supervisor did not die of anything else
            status, reason, code = recorded
        elif stopped:
            status, reason, code = RunStatus.STOPPED, "stopped by the user", None
        elif not failed:
            status, reason, code = RunStatus.COMPLETED, None, 0
        else:
            status, reason, code = (
                RunStatus.FAILED,
                f"the run's supervisor process died unexpectedly; {failed[0]}",
                None,
            )
        try:
            for rank, rank_status, rank_code, rank_reason in ranks:
                self.state.set_rank(name, attempt, rank, rank_status, exit_code=rank_code, reason=rank_reason)
            self.state.set_status(name, status, reason, exit_code=code)
        except StateFileError as e:
            return _Unwritten(status, reason, code, e.message)
        finally:
            from launcher.backends.local.mounts import remove_mount_points

            shutil.rmtree(layout.private, ignore_errors=True)
            remove_mount_points(layout.root)
        layout.outcome_file.unlink(missing_ok=True)  # recorded now
        return None

    def _kill_leftovers(self, name: str, layout: RunLayout) -> None:
        """Every process of the run, found by the token they all inherit, and the ranks'
        recorded process groups (in case a process dropped its environment)."""
        from launcher.backends.local.supervisor import KILL_AFTER
        from launcher.pod import reaper

        pids = [r["pid"] for r in self.state.active_ranks(name) if alive(r["pid"], r["pid_started"])]
        if pids:
            terminate_groups(pids, KILL_AFTER)
        reaper.kill_all(lambda: reaper.owned_by(layout.owner, contract.OWNER), reap=False)

    def watch(self, name: str, *, poll_seconds: float = 0.5) -> Iterator[Run]:
        last: tuple | None = None
        while True:
            run = self.get(name)
            key = (run.status, run.current_attempt)
            if key != last:
                last = key
                yield run
            if run.status.is_terminal:
                return
            time.sleep(poll_seconds)

    # ------------------------------------------------------------ logs

    def log_path(self, name: str, rank: int, attempt: int) -> Path | None:
        path = RunLayout(self.home, name).log_file(attempt, rank)
        return path if path.exists() else None

    def artifacts_dir(self, name: str) -> Path:
        return RunLayout(self.home, name).artifacts

    def _masker(self, name: str) -> Masker:
        row = self.state.row(name)
        used = set(json.loads(row["secrets"])) if row else set()
        try:
            secrets = [s for s in LocalSecretStore(self.home).list() if s.name in used]
        except LauncherError:
            secrets = []
        return Masker(v for s in secrets for v in s.masked_values())

    def logs(
        self,
        name: str,
        *,
        rank: int | None = None,
        attempt: int | None = None,
        tail: int | None = None,
        follow: bool = False,
        previous: bool = False,
        cancel: threading.Event | None = None,
    ) -> Iterator[LogLine]:
        from launcher.backends.local.logs import rank_lines

        attempt, ranks = self._select(name, rank, attempt, previous)
        masker = self._masker(name)

        def attempt_over() -> bool:
            run = self.get(name)
            return run.status.is_terminal or run.current_attempt != attempt

        yield from rank_lines(
            RunLayout(self.home, name),
            attempt,
            ranks,
            masker,
            tail=tail,
            follow=follow,
            attempt_over=attempt_over,
            cancel=cancel,
        )

    def _select(
        self, name: str, rank: int | None, attempt: int | None, previous: bool
    ) -> tuple[int, builtins.list[int]]:
        run = self.get(name)
        if attempt is None:
            attempt = run.current_attempt - (1 if previous and run.current_attempt > 1 else 0)
        if attempt < 1 or attempt > run.current_attempt:
            raise InputError(f"run {name} has attempts 1..{run.current_attempt}, not {attempt}")
        ranks = [rank] if rank is not None else list(range(run.nodes))
        if any(r < 0 or r >= run.nodes for r in ranks):
            raise InputError(f"run {name} has ranks 0..{run.nodes - 1}, not {rank}")
        return attempt, ranks

    def log_chunks(
        self,
        name: str,
        *,
        rank: int | None = None,
        attempt: int | None = None,
        previous: bool = False,
        prefix_ranks: bool = False,
    ) -> Iterator[bytes]:
        """The whole log of each selected rank, in turn, as masked bytes in large chunks
        (what `launcher logs` prints when it neither follows nor tails): no per-line work
        unless each line gets a "[rank N] " prefix. Every rank's part ends with a newline."""
        from launcher.backends.local.logs import rank_chunks

        attempt, ranks = self._select(name, rank, attempt, previous)
        masker = self._masker(name)
        yield from rank_chunks(RunLayout(self.home, name), attempt, ranks, masker, prefix_ranks=prefix_ranks)

    # ------------------------------------------------------------ exec / port-forward

    def _live_rank(self, name: str, rank: int) -> Run:
        run = self.get(name)
        if run.status.is_terminal:
            raise InputError(
                f"run {name} has ended ({run.status.value}): there is no rank to reach",
                hint=f"`launcher run -r {name}` starts it again" if run.status is not RunStatus.COMPLETED else None,
            )
        if not 0 <= rank < run.nodes:
            raise InputError(f"run {name} has no rank {rank}: its ranks are 0 to {run.nodes - 1}")
        return run

    def exec(self, name: str, argv: builtins.list[str], *, rank: int = 0, tty: bool = False) -> int:
        """argv in the rank's mount namespace (where it has one) with the environment and working
        directory its entrypoint recorded; waits while the rank is still setting up (integrations)."""
        from launcher.backends.local.attach import ExecRecord, run_in_rank
        from launcher.backends.local.mounts import PLAN_FILE, MountPlan

        if not argv:
            raise InputError("no command to run", hint="give it after --: `launcher exec RUN -- CMD...`")
        layout = RunLayout(self.home, name)
        while True:
            self._live_rank(name, rank)
            record = ExecRecord.read(layout.exec_record(rank))
            if record is not None:
                if not alive(record.pid, None):  # this attempt's rank ran its command and ended
                    raise InputError(f"rank {rank} of run {name} has ended; the run goes on in its other ranks")
                break
            time.sleep(0.2)
        try:
            return run_in_rank(record, MountPlan.load(layout.root / PLAN_FILE), argv, tty=tty)
        except ProcessLookupError:
            self._live_rank(name, rank)
            raise InputError(f"rank {rank} of run {name} has ended") from None
        except FileNotFoundError as e:
            raise InputError(f"cannot run {argv[0]!r} in rank {rank} of run {name}: {e.strerror or e}") from None
        except OSError as e:
            raise LauncherError(f"cannot enter rank {rank} of run {name}: {e.strerror or e}") from None

    def port_forward(
        self,
        name: str,
        *,
        rank: int,
        local_port: int,
        remote_port: int,
        ready=None,
        stop: threading.Event | None = None,
    ) -> None:
        """A TCP relay from 127.0.0.1:local_port to the rank's 127.0.0.1:remote_port: the ranks run here."""
        from launcher.backends.local.attach import relay

        self._live_rank(name, rank)
        try:
            relay(local_port, remote_port, ready=ready, stop=stop)
        except OSError as e:
            raise InputError(f"cannot listen on 127.0.0.1:{local_port}: {e.strerror or e}") from None

    # ------------------------------------------------------------ stop / delete

    def stop(self, name: str) -> Run:
        run = self.get(name)
        if run.status.is_terminal:
            return run
        self.state.request_stop(name)
        self._stop_processes(name)
        return self.get(name)

    def _stop_processes(self, name: str) -> None:
        """Have the supervisor stop the run's ranks, and stop them here if it is gone or stuck."""
        from launcher.backends.local.mounts import remove_mount_points
        from launcher.backends.local.supervisor import KILL_AFTER

        row = self._row(name)
        pid = row["supervisor_pid"]
        if pid and alive(pid, row["supervisor_started"]):
            os.kill(pid, 15)
            deadline = time.monotonic() + KILL_AFTER + 5
            while time.monotonic() < deadline:
                self._reconcile(name)
                if RunStatus(self._row(name)["status"]).is_terminal:
                    return
                time.sleep(0.1)
        # The supervisor is gone or stuck: stop the ranks ourselves.
        pids = [r["pid"] for r in self.state.active_ranks(name) if alive(r["pid"], r["pid_started"])]
        if pid and alive(pid, row["supervisor_started"]):
            pids.append(pid)
        terminate_groups(pids, KILL_AFTER)
        self._kill_leftovers(name, RunLayout(self.home, name))
        self.state.set_status(name, RunStatus.STOPPED, "stopped by the user")
        remove_mount_points(RunLayout(self.home, name).root)

    def delete(self, name: str) -> None:
        from launcher.backends.local.mounts import remove_mount_points

        run = self.get(name)
        root = RunLayout(self.home, name).root
        if run.status.is_terminal:
            # Nothing writes an ended run's files, and they go before the record: on a full
            # disk the space they free lets its deletion be written (state.db's WAL grows).
            remove_mount_points(root)
            shutil.rmtree(root, ignore_errors=True)
            self.state.delete_run(name)
            return
        # From here on no read finds the run (a follower of its logs says it was deleted),
        # while its ranks are stopped and its files removed; the record goes last, so a
        # delete killed on the way is finished by deleting the run again.
        self.state.mark_deleting(name)
        self._stop_processes(name)
        remove_mount_points(root)
        shutil.rmtree(root, ignore_errors=True)
        self.state.delete_run(name)


@dataclass(frozen=True)
class _Unwritten:
    """A run's outcome that its supervisor and this process know but cannot record (the
    state database cannot be written: a full disk)."""

    status: RunStatus
    reason: str | None
    exit_code: int | None
    error: str


def _not_found(name: str) -> NotFoundError:
    return NotFoundError(f"no run named {name!r}", hint="list runs with `launcher get runs`")


def _with(run: Run, unwritten: _Unwritten | None) -> Run:
    """The run as it is: with the outcome the state could not record."""
    if unwritten is None:
        return run
    note = f"run {run.name}: its outcome could not be recorded ({unwritten.error})"
    return replace(
        run,
        status=unwritten.status,
        reason=unwritten.reason,
        exit_code=unwritten.exit_code,
        warnings=[*run.warnings, note],
    )


SUBMITTER_FILE = ".submitter"
"""In a run's directory until its record is written: "pid start-time" of the submitting process."""


def _submitter_alive(root: Path) -> bool:
    """Whether the process that is submitting the run of directory `root` still lives."""
    try:
        pid, _, started = (root / SUBMITTER_FILE).read_text().partition(" ")
    except FileNotFoundError:
        return False
    except OSError:
        return True  # unreadable: left alone
    return pid.isdigit() and alive(int(pid), started.strip() or None)


def _age(iso: str) -> float:
    from datetime import datetime

    return (datetime.now(UTC) - datetime.fromisoformat(iso)).total_seconds()

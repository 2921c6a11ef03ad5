"""The Databricks backend: a run is a one-time job run (Jobs API 2.2 runs/submit).

submit uploads the run's folder (the driver, the plan, the entrypoint's zipapp, the driver's
settings) to the workspace, puts the run's secret values in a scope of its own, submits the
payload render.py makes, and writes the run's record (workspace.py). Reads ask runs/get of
the record's latest attempt; logs come from cluster log delivery on the profile's Volume
(logs.py), else runs/get-output. stop is runs/cancel; delete forgets the run (its workspace
folder and its scope; the delivered logs stay on the Volume). `run -r` submits attempt N+1; so does
a read that finds a failed attempt the run's RetryPolicy retries (retries.py: one-time runs are
not retried by the workspace).
Metrics come from the workspace's MLflow where the trainer logged there (tracker.py).
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.backends.base import Attempt, Backend, LogLine, Plan, RankState, Run, StatusEvent, retry_due, utcnow
from launcher.backends.capabilities import (
    ClusterProbe,
    ClusterReport,
    Feature,
    FreeGpus,
    OnDemandCompute,
    Restartable,
    TrackerMetrics,
    TrackerRun,
    Updatable,
)
from launcher.backends.databricks import render, retries
from launcher.backends.databricks.errors import calls
from launcher.backends.databricks.status import (
    PLATFORM,
    PROGRAM,
    cluster_id_of,
    ending_of,
    ms_time,
    status_of,
    task_run_id_of,
)
from launcher.backends.databricks.workspace import (
    mkdirs,
    open_client,
    put_file,
    read_record,
    run_names,
    write_record,
)
from launcher.backends.runstatus import RunStatus
from launcher.errors import InputError, LauncherError, NotFoundError

if TYPE_CHECKING:
    from databricks.sdk import WorkspaceClient

    from launcher.backends.databricks.profile import DatabricksProfile
    from launcher.backends.listing import RunQuery
    from launcher.pod.code_archive import Snapshot
    from launcher.secrets.kinds import Secret
    from launcher.secrets.store import LocalSecretStore
    from launcher.spec.models import RunSpec
    from launcher.spec.retry import RetryPolicy


PROBE_CONNECT_TIMEOUT = 5.0


class DatabricksBackend(Backend, Restartable, Updatable, ClusterProbe, TrackerMetrics, OnDemandCompute):
    name = "databricks"
    UNSUPPORTED = {
        Feature.UPDATE_MAX_DURATION: "a submitted run's timeout_seconds cannot be changed",
        Feature.UPDATE_PRIORITY: "a one-time run has no priority",
        Feature.EXEC: "a job cluster's driver takes no commands from outside (use a notebook on the cluster)",
        Feature.PORT_FORWARD: "a job cluster's ports are not reachable from here",
        Feature.GPU_USAGE: "a workspace has no fixed pool of GPUs to count (each run gets a new cluster)",
        Feature.QUEUE_USAGE: "there is no Kueue quota in a workspace",
        Feature.IMAGE_PROBE: "runs use the workspace's runtime (or Container Services), pulled by Databricks",
        Feature.CODE_SNAPSHOT: "a code snapshot is not shipped to a workspace yet (use a git_repo integration)",
        Feature.LOCAL_ARTIFACTS: "its runs write their files in the workspace, not on this machine",
        Feature.SECRETS_IN_CLUSTER: "its secrets live on this machine ($LAUNCHER_HOME/secrets); each run "
        "gets a secret scope of its own",
    }

    def __init__(self, profile: DatabricksProfile, home: Path):
        self.profile = profile
        self.home = home

    @classmethod
    def open(cls, profile: DatabricksProfile, home: Path) -> DatabricksBackend:
        return cls(profile, home)

    @cached_property
    def client(self) -> WorkspaceClient:
        return open_client(self.profile, self.home)

    def secret_store(self) -> LocalSecretStore:
        from launcher.secrets.store import LocalSecretStore

        return LocalSecretStore(self.home)

    def profile_warnings(self) -> list[str]:
        if self.profile.log_volume is None:
            return [
                f"clusters.{self.profile.name}.log_volume is not set: logs come from runs/get-output only "
                "(its last 5 MB, once the run ended), not while a run goes"
            ]
        return []

    # ---- offline ---------------------------------------------------------------------
    def check(self, spec: RunSpec) -> list[str]:
        render.check(spec, self.profile)
        self.check_exec(spec, [])
        return render.unhonoured(spec, self.profile)

    def plan(self, spec: RunSpec, secrets: list[Secret] | None = None, *, code: Snapshot | None = None) -> Plan:
        rendered = render.render(spec, self.profile, secrets or [])
        notes = [
            f"files: driver.py, driver.json, plan.json and the entrypoint's zipapp go to "
            f"{render.run_folder(self.profile, spec.name)} in the workspace"
        ]
        settings = rendered.settings
        notes.append(
            f"driver: {settings['processes']} process(es)"
            + (
                f" under TorchDistributor (local_mode {str(settings['local_mode']).lower()}, "
                f"use_gpu {str(settings['use_gpu']).lower()}), each a node of its own with LOCAL_RANK 0"
                if settings["processes"] > 1
                else ", the entrypoint on the driver"
            )
        )
        if rendered.secret_values:
            notes.append(
                f"secrets: {', '.join(sorted(rendered.secret_values))} go to the scope "
                f"{render.scope_name(spec.name)}; the payload names them, never their values"
            )
        return Plan(rendered.payload, rendered.warnings, notes)

    def on_demand_gpus(self, spec: RunSpec) -> FreeGpus:
        """Every run gets compute of its own: a new job cluster of the node type the profile's
        node_types give the spec's gpu_type, or serverless GPUs of an accelerator type that
        serverless offers (check refuses any other)."""
        placement = render.check(spec, self.profile)
        if self.profile.compute_mode == "serverless":
            kind, _ = render.serverless_accelerator(spec, placement)
            source = f"serverless {kind}"
        else:
            node = self.profile.node_table[placement.gpu_type_name]
            source = f"a new job cluster of {placement.nodes} {node.node_type_id}"
        gpu_type = placement.gpu_type_name if placement.gpus else "none"
        return FreeGpus(gpu_type, placement.gpus, placement.gpus, source, on_demand=True)

    # ---- submit ----------------------------------------------------------------------
    def submit(self, spec: RunSpec, secrets: list[Secret], *, code: Snapshot | None = None) -> Run:
        self.check_secrets(spec, secrets)
        w = self.client
        try:
            read_record(w, self.profile, spec.name)
        except NotFoundError:
            pass
        else:
            raise InputError(f"a run named {spec.name!r} already exists in {self.profile.where}")
        rendered = render.render(spec, self.profile, secrets)
        placement = rendered.placement
        assert placement is not None
        compute = spec.compute.model_copy(
            update={"nodes": placement.nodes, "gpus": placement.gpus, "gpu_type": placement.gpu_type_name}
        )
        spec = spec.model_copy(update={"compute": compute})
        record: dict[str, Any] = {
            "name": spec.name,
            "spec": spec.to_submitted(),
            "created_at": utcnow().isoformat(),
            "scope": render.scope_name(spec.name),
            "warnings": rendered.warnings,
            "attempts": [],
        }
        self._start(w, spec, rendered, record)
        run = self._derive(record)
        # What it cannot honour is said once, by submit, as on Kubernetes (the record keeps it);
        # a read's Run.warnings are for what that read found (`run --follow` prints them at the end).
        run.warnings = list(rendered.warnings)
        return run

    def _start(
        self,
        w: WorkspaceClient,
        spec: RunSpec,
        rendered: render.Rendered,
        record: dict[str, Any],
        *,
        retry: bool = False,
    ) -> None:
        """Upload the folder, fill the scope, submit, and record the attempt's run id."""
        from databricks.sdk.service.jobs import SubmitTask

        folder = render.run_folder(self.profile, spec.name)
        mkdirs(w, self.profile, folder)
        for file_name, data in render.files_of(spec, rendered).items():
            put_file(w, self.profile, f"{folder}/{file_name}", data)
        scope = record["scope"]
        if rendered.secret_values:
            self._fill_scope(w, scope, rendered.secret_values)
        payload = rendered.payload
        with calls(self.profile.where, f"submitting run {spec.name}"):
            if "ai_runtime_task" in payload["tasks"][0]:
                # databricks-sdk 0.58's SubmitTask has no ai_runtime_task: its client posts the body.
                answer = w.api_client.do("POST", "/api/2.2/jobs/runs/submit", body=payload)
                run_id = int(answer["run_id"])  # type: ignore[index,call-overload]
            else:
                waiter = w.jobs.submit(
                    run_name=payload["run_name"],
                    idempotency_token=payload["idempotency_token"],
                    timeout_seconds=payload.get("timeout_seconds"),
                    tasks=[SubmitTask.from_dict(t) for t in payload["tasks"]],
                )
                run_id = int(waiter.run_id)
        entry: dict[str, Any] = {"run_id": run_id, "submitted_at": utcnow().isoformat()}
        if retry:
            entry["retry"] = True
        record["attempts"].append(entry)
        write_record(w, self.profile, spec.name, record)

    def _fill_scope(self, w: WorkspaceClient, scope: str, values: dict[str, str]) -> None:
        from databricks.sdk import errors

        with calls(self.profile.where, f"creating the secret scope {scope}"):
            try:
                w.secrets.create_scope(scope)
            except errors.ResourceAlreadyExists:
                pass  # a restart's, or a submit retried: its keys are put again
            for key, value in values.items():
                w.secrets.put_secret(scope, key, string_value=value)

    # ---- reads -----------------------------------------------------------------------
    def _job_run(self, run_id: int) -> Any | None:
        """runs/get of one attempt; None where the workspace no longer has it."""
        from databricks.sdk import errors

        with calls(self.profile.where, f"reading run {run_id}"):
            try:
                return self.client.jobs.get_run(run_id)
            except (errors.InvalidParameterValue, errors.ResourceDoesNotExist, errors.NotFound) as e:
                if "does not exist" in str(e) or isinstance(e, errors.NotFound):
                    return None
                raise

    def _derive(self, record: dict[str, Any]) -> Run:
        """The run as its record and the workspace say now; reads only. A failed latest
        attempt that its RetryPolicy allows another for makes the run PENDING with the
        retry's due time (retry_at), which _observe acts on."""
        from launcher.spec.retry import RetryPolicy

        entries = record.get("attempts", [])
        policy = RetryPolicy.from_spec(record["spec"])
        attempts: list[Attempt] = []
        events: list[StatusEvent] = []
        retried_as: str | None = None
        for index, entry in enumerate(entries, start=1):
            job_run = self._job_run(entry["run_id"])
            reason: str | None
            if job_run is None:
                status, reason = RunStatus.UNKNOWN, f"the workspace no longer has run {entry['run_id']}"
                started = ended = None
            else:
                status, reason = status_of(job_run)
                started = ms_time(job_run.start_time)
                ended = ms_time(job_run.end_time) if status.is_terminal else None
                entry["cluster_id"] = cluster_id_of(job_run)
                entry["task_run_id"] = task_run_id_of(job_run)
            attempt = Attempt(
                index,
                status,
                started,
                ended,
                reason,
                [RankState(0, status, 0 if status is RunStatus.COMPLETED else None, reason)],
            )
            if status is RunStatus.FAILED and job_run is not None:
                if "retried_as" not in entry and index == len(entries):
                    # Kept in the record from when attempt N+1 is submitted (the record is
                    # written only then): an earlier attempt's log is not read again.
                    entry["retried_as"], entry["failure_class"], entry["evidence"] = self._failure(
                        record, job_run, reason, policy, retries.counted(entries)
                    )
                attempt.failure_class, attempt.evidence = entry.get("failure_class"), entry.get("evidence")
                if index == len(entries):
                    retried_as = entry.get("retried_as")
            attempts.append(attempt)
            # Its waits and its run as events (goodput splits the wall time by them): waiting
            # since it was submitted (a retry: since the attempt before it ended, the backoff
            # being its restart), running from the workspace's start, then how it ended.
            previous_end = attempts[-2].ended_at if len(attempts) > 1 else None
            waiting_since = previous_end or _parse(entry["submitted_at"])
            events.append(StatusEvent(RunStatus.PENDING, waiting_since, index, None))
            if started is not None:
                events.append(StatusEvent(RunStatus.RUNNING, max(started, waiting_since), index, None))
            if status.is_terminal or status is RunStatus.UNKNOWN:
                events.append(StatusEvent(status, ended or started or waiting_since, index, reason))
        last = attempts[-1] if attempts else Attempt(1, RunStatus.PENDING)
        status, reason, ended_at, retry_at = last.status, last.reason, last.ended_at, None
        if retried_as is not None and policy.allows(retries.counted(entries), retried_as):
            if record.get("retry_stopped"):
                status, reason = RunStatus.STOPPED, f"stopped by the user before attempt {last.index + 1}"
            elif record.get("retry_refused"):
                reason = f"attempt {last.index} failed ({last.reason}); {record['retry_refused']}"
            else:
                assert last.ended_at is not None
                retry_at = last.ended_at + timedelta(seconds=policy.delay(last.index))
                status, ended_at = RunStatus.PENDING, None
                reason = f"attempt {last.index} failed ({last.reason}); {retry_due(retry_at)}"
        return Run(
            name=record["name"],
            backend=self.name,
            status=status,
            created_at=_parse(record["created_at"]),
            spec=record["spec"],
            cluster=self.profile.name,
            started_at=attempts[0].started_at if attempts else None,
            ended_at=ended_at,
            reason=reason,
            exit_code=0 if status is RunStatus.COMPLETED else None,
            attempts=attempts,
            events=events,
            retry_at=retry_at,
        )

    def _failure(
        self,
        record: dict[str, Any],
        job_run: Any,
        reason: str | None,
        policy: RetryPolicy,
        finished: builtins.list[str],
    ) -> tuple[str, str | None, str | None]:
        """(retry class, failure class, evidence) of the latest attempt, which failed. Its log
        is read for evidence only where the policy could retry some failure: a run with no
        retries left (or none asked for) costs no log read."""
        lines: builtins.list[str] = []
        ending = ending_of(job_run)
        if ending in (PLATFORM, PROGRAM) and retries.may_retry(policy, finished):
            from launcher.backends.databricks.logs import fetch

            lines = fetch(self, record["name"], job_run, True).splitlines()
        kind, failure = retries.classify(ending, reason, lines)
        return kind, failure.kind if failure else None, failure.evidence if failure else None

    def _observe(self, record: dict[str, Any]) -> Run:
        """The run as a reader sees it, with the launcher's retry acted on: where its latest
        attempt failed, the policy allows another and the backoff is over, attempt N+1 is
        submitted here (retries.py: why a read does this on Databricks)."""
        run = self._derive(record)
        if run.retry_at is None or run.retry_at > utcnow():
            return run
        last = run.attempts[-1]
        try:
            self._next_attempt(record, retry=True)
        except LauncherError as e:
            # The observer cannot submit it (the spec no longer validates here, a secret this
            # machine lacks, a token that may only read): the run shows why and ends FAILED;
            # the record is not written, so an observer that can submit it still will.
            record["retry_refused"] = f"attempt {last.index + 1} could not be submitted from here: {e.message}"
        return self._derive(record)

    def _record(self, name: str) -> dict[str, Any]:
        return read_record(self.client, self.profile, name)

    def get(self, name: str) -> Run:
        return self._observe(self._record(name))

    def list(self, query: RunQuery | None = None) -> list[Run]:
        from launcher.backends.listing import RunQuery

        query = query or RunQuery()
        records = []
        for name in run_names(self.client, self.profile):
            if not query.matches_name(name):
                continue
            try:
                record = self._record(name)
            except NotFoundError:
                continue  # a folder without a record: a submit that did not get that far
            if query.matches_created(_parse(record["created_at"])) and query.matches_spec(record["spec"]):
                records.append(record)
        records.sort(key=lambda r: r["created_at"], reverse=True)
        out = []
        for record in records:
            run = self._observe(record)
            if query.matches(run):
                out.append(run)
                if query.wanted is not None and len(out) >= query.wanted:
                    break
        return out

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
        from launcher.backends.databricks.logs import read_logs

        record = self._record(name)
        attempts = record.get("attempts", [])
        if not attempts:
            return iter(())
        index = attempt or len(attempts)
        if previous and attempt is None:
            index = max(1, len(attempts) - 1)
        if not 1 <= index <= len(attempts):
            raise InputError(f"run {name} has no attempt {index} (it has {len(attempts)})")
        return read_logs(
            self, name, index, attempts[index - 1]["run_id"], rank=rank, tail=tail, follow=follow, cancel=cancel
        )

    # ---- acts ------------------------------------------------------------------------
    def stop(self, name: str) -> Run:
        record = self._record(name)
        run = self._derive(record)
        if run.retry_at is not None:  # its failed attempt waits for a retry: none is submitted
            record["retry_stopped"] = True
            write_record(self.client, self.profile, name, record)
            return self._derive(record)
        if not run.status.is_terminal and record.get("attempts"):
            with calls(self.profile.where, f"cancelling run {name}"):
                self.client.jobs.cancel_run(record["attempts"][-1]["run_id"])
            return self._derive(record)
        return run

    def delete(self, name: str) -> None:
        from databricks.sdk import errors

        record = self._record(name)
        run = self._derive(record)
        w = self.client
        with calls(self.profile.where, f"deleting run {name}"):
            if not run.status.is_terminal and run.retry_at is None and record.get("attempts"):
                w.jobs.cancel_run(record["attempts"][-1]["run_id"])
            try:
                w.secrets.delete_scope(record["scope"])
            except errors.NotFound:
                pass  # a run without secrets has no scope
            w.workspace.delete(render.run_folder(self.profile, name), recursive=True)

    def update(
        self,
        name: str,
        *,
        max_duration: float | None = None,
        priority: str | None = None,
        max_retries: int | None = None,
    ) -> Run:
        """max_retries only: the record's spec, which every observer's retry decision reads
        (the workspace keeps a submitted run's timeout, and a one-time run has no priority)."""
        changes = {
            k: v
            for k, v in (("max_duration", max_duration), ("priority", priority), ("max_retries", max_retries))
            if v is not None
        }
        record = self._record(name)
        self.refuse_update(self._derive(record), changes)
        record["spec"].setdefault("scheduling", {})["max_retries"] = max_retries
        write_record(self.client, self.profile, name, record)
        return self._derive(record)

    def restart(self, name: str) -> Run:
        record = self._record(name)
        self.refuse_restart(self._derive(record))
        self._next_attempt(record, retry=False)
        return self._derive(record)

    def _next_attempt(self, record: dict[str, Any], *, retry: bool) -> None:
        """Submit attempt N+1 of the record's spec, validated again, with this machine's
        secrets: `run -r` (retry False: the retry budget counts afresh from it), or the
        policy's retry (True)."""
        from launcher.spec.models import RunSpec

        record.pop("retry_refused", None)
        record.pop("retry_stopped", None)
        spec = RunSpec.model_validate(record["spec"])
        self.check(spec)
        secrets = self.secret_store().for_run(spec.secrets)
        self.check_secrets(spec, secrets)
        rendered = render.render(spec, self.profile, secrets, attempt=len(record["attempts"]) + 1)
        self._start(self.client, spec, rendered, record, retry=retry)

    def tracker_metrics(self, run: Run) -> builtins.list[TrackerRun]:  # `list` here is the method above
        from launcher.backends.databricks.tracker import tracker_runs

        return tracker_runs(self.client, self.profile, run)

    def probe(self) -> ClusterReport:
        from launcher.backends.databricks.reach import check_reachable

        # The SDK would retry a refused connection for its whole request_timeout: ask the host once first.
        check_reachable(self.profile.name, {"host": self.profile.host}, timeout=PROBE_CONNECT_TIMEOUT)
        with calls(self.profile.where, "asking who the token belongs to (current_user.me)"):
            self.client.current_user.me()
        return ClusterReport({"Jobs API 2.2": True}, [])


def _parse(text: str) -> datetime:
    at = datetime.fromisoformat(text)
    return at if at.tzinfo else at.replace(tzinfo=UTC)

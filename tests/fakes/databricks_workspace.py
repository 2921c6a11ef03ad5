"""A stateful fake Databricks workspace, as a program or in-process: what the real
databricks-sdk calls for a one-time job run, and the Files and MLflow APIs of
databricks_files.py / databricks_mlflow.py (this class extends that fake).

    python tests/fakes/databricks_workspace.py --url-file FILE [--token T] [--volume cat/schema/vol ...]

writes its base URL to FILE once it serves. It speaks:

    POST /api/2.2/jobs/runs/submit      run_name, tasks[spark_python_task, new_cluster | ai_runtime_task],
                                        timeout_seconds,
                                        idempotency_token (a second submit with it answers the same run_id)
    GET  /api/2.2/jobs/runs/get         ?run_id=  state (life_cycle_state, result_state, state_message),
                                        status (state, termination_details{code,type,message}), tasks[]
    GET  /api/2.2/jobs/runs/get-output  ?run_id= of the TASK run: logs (last 5 MB), logs_truncated, error
    POST /api/2.2/jobs/runs/cancel      run_id (a parent's or a task's)
    GET  /api/2.2/jobs/runs/list        limit, page_token, active_only, completed_only -> runs, has_more,
                                        next_page_token
    POST /api/2.2/jobs/runs/repair      run_id, rerun_all_failed_tasks -> repair_id (runs the task again)
    POST /api/2.0/secrets/scopes/create|delete, GET scopes/list, POST secrets/put|delete, GET secrets/list
    POST /api/2.0/workspace/import|mkdirs|delete, GET workspace/export|list|get-status
    GET  /api/2.0/preview/scim/v2/Me    (current_user.me(): the reach check)

It RUNS each submitted spark_python_task, and each ai_runtime_task (serverless GPU
compute: its deployment's command_path, as a job cluster's driver; no scope environment,
no log delivery, and only the accelerator types serverless offers): the python file (from the workspace or a Volume)
in a subprocess with this interpreter, its `parameters`, and the new_cluster's
`spark_env_vars` with every `{{secrets/scope/key}}` resolved from its secret store; a
missing secret fails the run as the cluster would (INTERNAL_ERROR, CLUSTER_ERROR). The
driver sees the workspace at <root>/Workspace and Volumes at <root>/Volumes, as a real
driver sees its FUSE mounts at /Workspace and /Volumes: paths with those prefixes in the
python file and the parameters are rewritten to them (files are copied there when the run
starts). Life cycle: PENDING -> RUNNING -> TERMINATING -> TERMINATED with result_state
SUCCESS, FAILED, CANCELED or TIMEDOUT (timeout_seconds is enforced). Driver stdout and
stderr go to the cluster_log_conf volumes destination, <dest>/<cluster_id>/driver/stdout
and stderr, as cluster log delivery writes them (every half second here, minutes there).

Tests reach the program's state through /fake/... endpoints (no auth; loopback only):
POST /fake/volume {catalog, schema, volume}; POST /fake/fail {method, pattern, status,
code, message, times} (an fnmatch glob over the request path); POST /fake/slow {method, pattern,
seconds, times} (matching requests are answered `seconds` late, each waiting on its own, so
that two clients' calls overlap: a race made certain); POST /fake/lose {run_id}
(the workspace forgets a run: runs/get answers 400 "does not exist"); GET /fake/submits
(every runs/submit body, as received).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

if __package__ in (None, ""):  # run as a program: import `tests.fakes` from the repository, and not
    # this folder's http.py as the standard library's http
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from tests.fakes.databricks_files import ApiError, FakeDatabricksFiles, _Entry, _Handler, now_ms

JOBS = "/api/2.2/jobs/runs"
SECRETS = "/api/2.0/secrets"
WORKSPACE = "/api/2.0/workspace"
ME = "/api/2.0/preview/scim/v2/Me"
OUTPUT_LIMIT = 5 * 1024 * 1024  # runs/get-output gives the last 5 MB of the logs
LIST_LIMIT = 25  # runs/list's largest page
SECRET_REF = re.compile(r"\{\{secrets/([^/}]+)/([^}]+)\}\}")
DELIVERY_SECONDS = 0.5
CANCEL_GRACE_SECONDS = 5.0
USER = "fake-user@example.com"


@dataclass
class FakeRun:
    run_id: int
    task_run_id: int
    body: dict
    cluster_id: str
    life_cycle: str = "PENDING"
    result: str | None = None
    message: str = ""
    code: str | None = None
    kind: str | None = None
    start_time: int = field(default_factory=now_ms)
    end_time: int = 0
    stdout: bytes = b""
    stderr: bytes = b""
    error: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    attempt: int = 0

    @property
    def task(self) -> dict:
        return self.body["tasks"][0]

    def status(self) -> dict:
        state = {"TERMINATED": "TERMINATED", "INTERNAL_ERROR": "TERMINATED", "SKIPPED": "TERMINATED"}.get(
            self.life_cycle, self.life_cycle
        )
        out: dict = {"state": state}
        if self.code:
            out["termination_details"] = {"code": self.code, "type": self.kind, "message": self.message}
        return out

    def state(self) -> dict:
        out = {"life_cycle_state": self.life_cycle, "state_message": self.message, "user_cancelled_or_timedout": False}
        if self.result:
            out["result_state"] = self.result
            out["user_cancelled_or_timedout"] = self.result in ("CANCELED", "TIMEDOUT")
        return out

    def to_json(self, host: str) -> dict:
        task = {
            "run_id": self.task_run_id,
            "task_key": self.task.get("task_key", "task"),
            "state": self.state(),
            "status": self.status(),
            "start_time": self.start_time,
            "end_time": self.end_time,
            "attempt_number": self.attempt,
            "cluster_instance": {"cluster_id": self.cluster_id},
        }
        for k in ("spark_python_task", "new_cluster", "ai_runtime_task"):
            if k in self.task:
                task[k] = self.task[k]
        return {
            "run_id": self.run_id,
            "job_id": 0,
            "run_name": self.body.get("run_name", "Untitled"),
            "run_type": "SUBMIT_RUN",
            "creator_user_name": USER,
            "number_in_job": self.run_id,
            "state": self.state(),
            "status": self.status(),
            "start_time": self.start_time,
            "end_time": self.end_time,
            "run_page_url": f"{host}/#job/0/run/{self.run_id}",
            "tasks": [task],
            "cluster_instance": {"cluster_id": self.cluster_id},
        }


class FakeWorkspace(FakeDatabricksFiles):
    def __init__(self, token: str = "dapi-fake-0123456789abcdef", root: Path | None = None):
        super().__init__(token)
        self.root = Path(root or tempfile.mkdtemp(prefix="fake-databricks-"))
        self.workspace: dict[str, bytes] = {}
        self.workspace_dirs: set[str] = {"/", "/Users", f"/Users/{USER}", "/Shared"}
        self.scopes: dict[str, dict[str, str]] = {}
        self.runs: dict[int, FakeRun] = {}
        self.by_task: dict[int, int] = {}
        self.tokens: dict[str, int] = {}
        self.submits: list[dict] = []
        self.slow: list[dict] = []
        self._next_id = 1000
        self._threads: list[threading.Thread] = []

    # ---- lifecycle ---------------------------------------------------------------------
    def start(self) -> FakeWorkspace:
        fake = self

        class Handler(_WorkspaceHandler):
            state = fake

        from tests.fakes.http import LoopbackServer

        self._server = LoopbackServer(Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-workspace", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self.lock:
            runs = list(self.runs.values())
        for run in runs:
            run.cancel.set()
        for t in self._threads:
            t.join(timeout=CANCEL_GRACE_SECONDS + 5)
        super().stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def delay_of(self, method: str, path: str) -> float:
        """How late a request is answered (/fake/slow), using up one of that knob's times."""
        with self.lock:
            for knob in self.slow:
                if knob["method"] == method and fnmatch.fnmatch(path, knob["pattern"]) and knob["times"] != 0:
                    if knob["times"] is not None:
                        knob["times"] -= 1
                    return float(knob["seconds"])
        return 0.0

    def lose(self, run_id: int) -> None:
        with self.lock:
            run = self.runs.pop(run_id, None)
        if run is not None:
            run.cancel.set()

    # ---- ids ---------------------------------------------------------------------------
    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    # ---- jobs (lock held) --------------------------------------------------------------
    def submit(self, body: dict) -> dict:
        token = body.get("idempotency_token")
        if token and len(token) > 64:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "idempotency_token must be at most 64 characters")
        if token and token in self.tokens:
            return {"run_id": self.tokens[token]}
        tasks = body.get("tasks") or []
        if len(tasks) != 1 or not ("spark_python_task" in tasks[0] or "ai_runtime_task" in tasks[0]):
            raise ApiError(
                400, "INVALID_PARAMETER_VALUE", "this fake runs exactly one spark_python_task or ai_runtime_task"
            )
        task = tasks[0]
        if "ai_runtime_task" in task:
            _check_ai_runtime(task["ai_runtime_task"])
        elif "new_cluster" not in task:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "this fake needs a new_cluster")
        self.submits.append(body)
        run = FakeRun(self._id(), self._id(), body, cluster_id=f"0101-000000-fake{self._next_id}")
        self.runs[run.run_id] = run
        self.by_task[run.task_run_id] = run.run_id
        if token:
            self.tokens[token] = run.run_id
        self._launch(run)
        return {"run_id": run.run_id}

    def _launch(self, run: FakeRun) -> None:
        thread = threading.Thread(target=self._execute, args=(run,), name=f"run-{run.run_id}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def run_of(self, run_id: int, *, task: bool = False) -> FakeRun:
        rid = self.by_task.get(run_id, run_id) if task else run_id
        run = self.runs.get(rid)
        if run is None or (task and run_id not in self.by_task):
            if not task and run_id in self.by_task and self.by_task[run_id] in self.runs:
                return self.runs[self.by_task[run_id]]
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Run {run_id} does not exist.")
        return run

    def _materialize(self) -> None:
        """Copy the workspace and the Volumes to <root>, where the driver finds them."""
        for path, data in self.workspace.items():
            _write(self.root / "Workspace" / path.lstrip("/"), data)
        for path, entry in self.files.items():
            _write(self.root / path.lstrip("/"), entry.data)

    def _local(self, value: str) -> str:
        for prefix in ("/Workspace/", "/Volumes/", "dbfs:/Volumes/"):
            value = value.replace(prefix, str(self.root / prefix.split("/", 1)[1]) + "/")
        return value

    def _execute(self, run: FakeRun) -> None:
        # Serverless GPU compute (ai_runtime_task) has no cluster of the run's: no environment
        # from a scope, no log delivery; its driver runs as a job cluster's does.
        task, cluster = run.task, run.task.get("new_cluster") or {}
        timeout = float(run.body.get("timeout_seconds") or 0)
        with self.lock:
            run.attempt += 1
            run.life_cycle, run.result, run.code, run.kind, run.error = "PENDING", None, None, None, None
            run.message = "Waiting for cluster"
            run.end_time = 0
            env = dict(os.environ)
            # As a Databricks runtime does: its Python environment is the cluster's `python` and
            # Spark's workers' (PYSPARK_PYTHON), whatever PATH the fake was started with.
            env["PYSPARK_PYTHON"] = sys.executable
            env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
            missing = None
            for k, v in (cluster.get("spark_env_vars") or {}).items():

                def resolve(m: re.Match) -> str:
                    nonlocal missing
                    value = self.scopes.get(m.group(1), {}).get(m.group(2))
                    if value is None:
                        missing = f"{m.group(1)}/{m.group(2)}"
                        return ""
                    return value

                env[k] = SECRET_REF.sub(resolve, v)
            self._materialize()
        started = time.monotonic()
        if run.cancel.wait(0.3):
            return self._end(run, "CANCELED", "USER_CANCELED", "SUCCESS", "Run cancelled.")
        if missing:
            with self.lock:
                run.life_cycle, run.code, run.kind = "INTERNAL_ERROR", "CLUSTER_ERROR", "CLIENT_ERROR"
                run.message = f"Secret does not exist with scope and key: {missing}"
                run.end_time = now_ms()
            return None
        if "ai_runtime_task" in task:
            deployment = task["ai_runtime_task"]["deployments"][0]
            spt = {"python_file": deployment["command_path"], "parameters": task["ai_runtime_task"].get("parameters")}
        else:
            spt = task["spark_python_task"]
        python_file = spt["python_file"]
        if spt.get("source", "WORKSPACE") == "WORKSPACE" and not python_file.startswith(("/Workspace/", "/Volumes/")):
            python_file = "/Workspace" + python_file
        argv = [sys.executable, self._local(python_file), *(self._local(p) for p in spt.get("parameters") or [])]
        out_path = self.root / "clusters" / run.cluster_id / "driver"
        out_path.mkdir(parents=True, exist_ok=True)
        (out_path.parent / "tmp").mkdir(exist_ok=True)
        env["TMPDIR"] = str(out_path.parent / "tmp")  # a cluster's local disk: gone with the fake
        with open(out_path / "stdout", "wb") as out, open(out_path / "stderr", "wb") as err:
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, cwd=out_path, start_new_session=True)
        with self.lock:
            run.life_cycle, run.message = "RUNNING", "In run"
        ended = None
        last_delivery = 0.0
        while proc.poll() is None:
            if run.cancel.is_set():
                ended = ("CANCELED", "USER_CANCELED", "SUCCESS", "Run cancelled.")
            elif timeout and time.monotonic() - started > timeout:
                ended = ("TIMEDOUT", "RUN_EXECUTION_ERROR", "CLIENT_ERROR", f"Run timed out after {timeout:g} seconds")
            if ended:
                with self.lock:
                    run.life_cycle = "TERMINATING"
                _kill(proc)
                break
            if time.monotonic() - last_delivery > DELIVERY_SECONDS:
                self._deliver(run, out_path)
                last_delivery = time.monotonic()
            time.sleep(0.1)
        proc.wait()
        with self.lock:
            run.life_cycle = "TERMINATING"
        self._deliver(run, out_path)
        if ended is None:
            if proc.returncode == 0:
                ended = ("SUCCESS", "SUCCESS", "SUCCESS", "")
            else:
                lines = [ln for ln in run.stderr.decode(errors="replace").splitlines() if ln.strip()]
                run.error = lines[-1] if lines else f"exit code {proc.returncode}"
                ended = ("FAILED", "RUN_EXECUTION_ERROR", "CLIENT_ERROR", "Workload failed, see run output for details")
        time.sleep(0.2)
        self._end(run, *ended)
        return None

    def _end(self, run: FakeRun, result: str, code: str, kind: str, message: str) -> None:
        with self.lock:
            run.life_cycle, run.result, run.code, run.kind, run.message = "TERMINATED", result, code, kind, message
            run.end_time = now_ms()

    def _deliver(self, run: FakeRun, out_path: Path) -> None:
        run.stdout = (out_path / "stdout").read_bytes()
        run.stderr = (out_path / "stderr").read_bytes()
        cluster = run.task.get("new_cluster") or {}
        dest = ((cluster.get("cluster_log_conf") or {}).get("volumes") or {}).get("destination")
        if not dest:
            return
        base = dest.removeprefix("dbfs:").rstrip("/") + f"/{run.cluster_id}/driver"
        with self.lock:
            try:
                self._mkdirs(base)
            except ApiError:
                return  # no such Volume: real delivery fails in silence too
            self.files[f"{base}/stdout"] = _Entry(run.stdout)
            self.files[f"{base}/stderr"] = _Entry(run.stderr)

    def cancel(self, run_id: int) -> None:
        run = self.run_of(run_id)
        run.cancel.set()

    def repair(self, body: dict) -> dict:
        run = self.run_of(int(body["run_id"]))
        if run.life_cycle not in ("TERMINATED", "INTERNAL_ERROR"):
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Run {run.run_id} is still active")
        run.cancel = threading.Event()
        self._launch(run)
        return {"repair_id": self._id()}

    def output(self, run_id: int) -> dict:
        run = self.run_of(run_id, task=True)
        logs = run.stdout + run.stderr
        out: dict = {"metadata": run.to_json(self.host)["tasks"][0], "logs_truncated": len(logs) > OUTPUT_LIMIT}
        out["logs"] = logs[-OUTPUT_LIMIT:].decode(errors="replace")
        if run.error:
            out["error"] = run.error
        return out

    def list_runs(self, query: dict) -> dict:
        runs = sorted(self.runs.values(), key=lambda r: r.run_id, reverse=True)
        if query.get("active_only") == "true":
            runs = [r for r in runs if r.life_cycle not in ("TERMINATED", "INTERNAL_ERROR")]
        if query.get("completed_only") == "true":
            runs = [r for r in runs if r.life_cycle in ("TERMINATED", "INTERNAL_ERROR")]
        limit = min(int(query.get("limit") or LIST_LIMIT), LIST_LIMIT)
        start = int(query.get("page_token") or 0)
        page = runs[start : start + limit]
        out: dict = {"runs": [r.to_json(self.host) for r in page], "has_more": start + limit < len(runs)}
        if out["has_more"]:
            out["next_page_token"] = str(start + limit)
        if not page:
            del out["runs"]
        return out

    # ---- secrets (lock held) -----------------------------------------------------------
    def secrets_call(self, method: str, endpoint: str, args: dict) -> dict:
        scope = args.get("scope", "")
        if endpoint == "/scopes/create":
            if not re.fullmatch(r"[A-Za-z0-9_.@-]{1,128}", scope):
                raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Invalid scope name: {scope}")
            if scope in self.scopes:
                raise ApiError(400, "RESOURCE_ALREADY_EXISTS", f"Scope {scope} already exists!")
            self.scopes[scope] = {}
            return {}
        if endpoint == "/scopes/list":
            return {"scopes": [{"name": s, "backend_type": "DATABRICKS"} for s in sorted(self.scopes)]}
        if scope not in self.scopes:
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Scope {scope} does not exist!")
        if endpoint == "/scopes/delete":
            del self.scopes[scope]
        elif endpoint == "/put":
            if "bytes_value" in args:
                raise ApiError(400, "INVALID_PARAMETER_VALUE", "this fake keeps string_value only")
            self.scopes[scope][args["key"]] = args["string_value"]
        elif endpoint == "/delete":
            if self.scopes[scope].pop(args.get("key", ""), None) is None:
                raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Secret {args.get('key')} does not exist!")
        elif endpoint == "/list":
            return {"secrets": [{"key": k, "last_updated_timestamp": now_ms()} for k in sorted(self.scopes[scope])]}
        else:
            raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{method} {SECRETS}{endpoint}'")
        return {}

    # ---- workspace files (lock held) ---------------------------------------------------
    def workspace_call(self, method: str, endpoint: str, args: dict) -> dict:
        path = "/" + str(args.get("path", "")).strip("/")
        path = path.removeprefix("/Workspace") or "/"
        parent = path.rsplit("/", 1)[0] or "/"
        if endpoint == "/mkdirs":
            if path in self.workspace:
                raise ApiError(400, "RESOURCE_ALREADY_EXISTS", f"A file exists at {path}")
            while path not in self.workspace_dirs:
                self.workspace_dirs.add(path)
                path = path.rsplit("/", 1)[0] or "/"
            return {}
        if endpoint == "/import":
            if parent not in self.workspace_dirs:
                raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"The parent folder ({parent}) does not exist.")
            if path in self.workspace and not args.get("overwrite"):
                raise ApiError(400, "RESOURCE_ALREADY_EXISTS", f"{path} already exists.")
            self.workspace[path] = base64.b64decode(args.get("content") or "")
            return {}
        if endpoint == "/export":
            if path not in self.workspace:
                raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Path ({path}) doesn't exist.")
            return {"content": base64.b64encode(self.workspace[path]).decode(), "file_type": "py"}
        if endpoint == "/get-status":
            if path in self.workspace:
                return {"path": path, "object_type": "FILE", "size": len(self.workspace[path])}
            if path in self.workspace_dirs:
                return {"path": path, "object_type": "DIRECTORY"}
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Path ({path}) doesn't exist.")
        if endpoint == "/list":
            if path not in self.workspace_dirs:
                raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Path ({path}) doesn't exist.")
            prefix = path.rstrip("/") + "/"
            objects = [
                {"path": d, "object_type": "DIRECTORY"}
                for d in sorted(self.workspace_dirs)
                if d.startswith(prefix) and "/" not in d[len(prefix) :] and d != path
            ] + [
                {"path": f, "object_type": "FILE", "size": len(v)}
                for f, v in sorted(self.workspace.items())
                if f.startswith(prefix) and "/" not in f[len(prefix) :]
            ]
            return {"objects": objects} if objects else {}
        if endpoint == "/delete":
            inside = [p for p in (*self.workspace, *self.workspace_dirs) if p.startswith(path.rstrip("/") + "/")]
            if path not in self.workspace and path not in self.workspace_dirs:
                raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Path ({path}) doesn't exist.")
            if inside and not args.get("recursive"):
                raise ApiError(400, "DIRECTORY_NOT_EMPTY", f"Folder ({path}) is not empty")
            for p in [path, *inside]:
                self.workspace.pop(p, None)
                self.workspace_dirs.discard(p)
            return {}
        raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{method} {WORKSPACE}{endpoint}'")


# Serverless GPU compute's accelerator types and the GPUs of one (a count is one, or a multiple of 8).
AI_RUNTIME_ACCELERATORS = {"GPU_1xA10": 1, "GPU_1xH100": 1, "GPU_8xH100": 8, "GPU_8xB300": 8}


def _check_ai_runtime(task: dict) -> None:
    """What serverless GPU compute refuses of an ai_runtime_task: one deployment, with a
    command_path and an accelerator type and count it offers."""
    deployments = task.get("deployments") or []
    if len(deployments) != 1 or not deployments[0].get("command_path"):
        raise ApiError(400, "INVALID_PARAMETER_VALUE", "ai_runtime_task needs one deployment with a command_path")
    compute = deployments[0].get("compute") or {}
    kind, count = compute.get("accelerator_type"), compute.get("accelerator_count")
    per = AI_RUNTIME_ACCELERATORS.get(kind or "")
    if per is None:
        raise ApiError(
            400,
            "INVALID_PARAMETER_VALUE",
            f"accelerator_type {kind} is not one of {', '.join(AI_RUNTIME_ACCELERATORS)}",
        )
    if not isinstance(count, int) or count < 1 or count % per or (per == 1 and count != 1):
        raise ApiError(400, "INVALID_PARAMETER_VALUE", f"accelerator_count {count} is not offered for {kind}")


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _kill(proc: subprocess.Popen) -> None:
    """SIGTERM to the driver's group, SIGKILL after a grace (a cluster's termination)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=CANCEL_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class _WorkspaceHandler(_Handler):
    state: FakeWorkspace  # type: ignore[assignment]

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        ours = url.path.startswith((JOBS + "/", SECRETS + "/", WORKSPACE + "/", ME, "/fake/"))
        if not ours:
            return super()._dispatch()
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self._body() if self.command in ("PUT", "POST") else b""
        state = self.state
        try:
            args = query
            if self.command == "POST":
                try:
                    args = json.loads(body or b"{}")
                except ValueError:
                    raise ApiError(400, "MALFORMED_REQUEST", "Request body is not valid JSON.") from None
            if url.path.startswith("/fake/"):
                return self._json(200, self._control(url.path, args))
            if self.headers.get("Authorization", "") != f"Bearer {state.token}":
                raise ApiError(401, "UNAUTHENTICATED", "Invalid access token.")
            delay = state.delay_of(self.command, url.path)
            if delay:
                time.sleep(delay)  # outside the lock: the other requests go on meanwhile
            with state.lock:
                state.requests.append((self.command, url.path))
                state._check_fault(self.command, url.path)
                answer = self._route(url.path, args)
            self._json(200, answer)
        except ApiError as e:
            headers = {"Content-Type": "application/json"}
            if e.status in (429, 503):
                headers["Retry-After"] = "1"
            self._send(e.status, json.dumps({"error_code": e.code, "message": e.message}).encode(), headers)

    do_GET = do_HEAD = do_PUT = do_DELETE = do_POST = _dispatch

    def _route(self, path: str, args: dict) -> dict:
        state, m = self.state, self.command
        if path == ME and m == "GET":
            return {"id": "1", "userName": USER, "active": True, "displayName": "Fake User"}
        if path.startswith(SECRETS + "/"):
            return state.secrets_call(m, path[len(SECRETS) :], args)
        if path.startswith(WORKSPACE + "/"):
            return state.workspace_call(m, path[len(WORKSPACE) :], args)
        endpoint = path[len(JOBS) :]

        def run_id() -> int:
            try:
                return int(args["run_id"])
            except (KeyError, ValueError):
                raise ApiError(400, "INVALID_PARAMETER_VALUE", "run_id is required") from None

        if (m, endpoint) == ("POST", "/submit"):
            return state.submit(args)
        if (m, endpoint) == ("GET", "/get"):
            return state.run_of(run_id()).to_json(state.host)
        if (m, endpoint) == ("GET", "/get-output"):
            rid = run_id()
            if rid in state.runs:
                raise ApiError(
                    400,
                    "INVALID_PARAMETER_VALUE",
                    "Retrieving the output of runs with multiple tasks is not supported. "
                    "Please retrieve the output of each individual task run instead.",
                )
            return state.output(rid)
        if (m, endpoint) == ("POST", "/cancel"):
            state.cancel(run_id())
            return {}
        if (m, endpoint) == ("GET", "/list"):
            return state.list_runs(args)
        if (m, endpoint) == ("POST", "/repair"):
            return state.repair(args)
        raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{m} {path}'")

    def _control(self, path: str, args: dict) -> dict:
        state = self.state
        if path == "/fake/volume":
            return {"path": state.create_volume(args["catalog"], args["schema"], args["volume"])}
        if path == "/fake/fail":
            state.fail(
                args["method"],
                args["pattern"],
                int(args.get("status", 500)),
                args.get("code", "INTERNAL_ERROR"),
                args.get("message", "injected failure"),
                args.get("times"),
            )
            return {}
        if path == "/fake/slow":
            with state.lock:
                state.slow.append(
                    {
                        "method": args["method"].upper(),
                        "pattern": args["pattern"],
                        "seconds": float(args["seconds"]),
                        "times": args.get("times"),
                    }
                )
            return {}
        if path == "/fake/lose":
            state.lose(int(args["run_id"]))
            return {}
        if path == "/fake/submits":
            with state.lock:
                return {"submits": list(state.submits)}
        raise ApiError(404, "ENDPOINT_NOT_FOUND", path)


@dataclass
class WorkspaceProgram:
    """The fake started as a program (`running()`): its URL, token and control endpoints."""

    host: str
    token: str

    def env(self) -> dict[str, str]:
        return {"DATABRICKS_HOST": self.host, "DATABRICKS_TOKEN": self.token}

    def client(self, **config):
        from databricks.sdk import WorkspaceClient

        return WorkspaceClient(host=self.host, token=self.token, **config)

    def control(self, what: str, body: dict | None = None) -> dict:
        import urllib.request

        request = urllib.request.Request(
            f"{self.host}/fake/{what}",
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json"},
            method="POST" if body is not None else "GET",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    def fail(self, method: str, pattern: str, status: int, code: str, times: int | None = 1) -> None:
        self.control("fail", {"method": method, "pattern": pattern, "status": status, "code": code, "times": times})

    def slow(self, method: str, pattern: str, seconds: float, times: int | None = 1) -> None:
        self.control("slow", {"method": method, "pattern": pattern, "seconds": seconds, "times": times})

    def submits(self) -> list[dict]:
        return self.control("submits")["submits"]


@contextlib.contextmanager
def running(tmp: Path, *volumes: str, token: str = "dapi-fake-0123456789abcdef") -> Iterator[WorkspaceProgram]:
    """Start this file as a program, wait for its URL file, and stop it (and its runs) after."""
    url_file = tmp / "fake-workspace.url"
    root = tmp / "fake-workspace-root"
    argv = [sys.executable, __file__, "--url-file", str(url_file), "--token", token, "--root", str(root)]
    for v in volumes:
        argv += ["--volume", v]
    log = open(tmp / "fake-workspace.log", "wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not url_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the fake workspace did not start: {(tmp / 'fake-workspace.log').read_text()}")
            time.sleep(0.05)
        yield WorkspaceProgram(url_file.read_text(), token)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url-file", required=True, help="where to write the base URL once serving")
    parser.add_argument("--token", default=os.environ.get("FAKE_DATABRICKS_TOKEN", "dapi-fake-0123456789abcdef"))
    parser.add_argument("--volume", action="append", default=[], help="catalog/schema/volume to create")
    parser.add_argument("--root", help="where drivers see /Workspace and /Volumes (default: a temporary directory)")
    args = parser.parse_args(argv)
    fake = FakeWorkspace(args.token, Path(args.root) if args.root else None).start()
    for volume in args.volume:
        fake.create_volume(*volume.split("/"))
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    tmp = Path(args.url_file + ".tmp")
    tmp.write_text(fake.host)
    tmp.replace(args.url_file)  # whole or absent: a reader never sees half a URL
    stopped.wait()
    fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

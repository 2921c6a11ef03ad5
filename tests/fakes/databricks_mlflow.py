"""A stateful fake of a Databricks workspace's MLflow tracking server (its REST API, 2.0).

It is served by the same fake workspace as the Files API (tests/fakes/databricks_files.py:
`FakeDatabricksFiles.mlflow`), so a run that reads a dbfs:/Volumes dataset and logs to
MLflow talks to one host, with one token. It speaks what the real mlflow client
(MlflowClient(tracking_uri="databricks"), through databricks-sdk) calls: in a training run
with Composer's MLFlowLogger (*), and when a test (or a user) reads the run back:

    GET  /api/2.0/mlflow/experiments/get-by-name    ?experiment_name=                      (*)
    GET  /api/2.0/mlflow/experiments/get            ?experiment_id=
    POST /api/2.0/mlflow/experiments/create         {name, artifact_location, tags}        (*)
    POST /api/2.0/mlflow/runs/create                {experiment_id, run_name, start_time, tags, user_id}  (*)
    GET  /api/2.0/mlflow/runs/get                   ?run_id=                               (*)
    POST /api/2.0/mlflow/runs/update                {run_id, status, end_time, run_name}   (*)
    POST /api/2.0/mlflow/runs/search                {experiment_ids, filter, max_results, page_token}
    POST /api/2.0/mlflow/runs/log-batch             {run_id, metrics, params, tags}        (*)
    POST /api/2.0/mlflow/runs/log-metric            {run_id, key, value, timestamp, step}
    POST /api/2.0/mlflow/runs/log-parameter         {run_id, key, value}
    POST /api/2.0/mlflow/runs/set-tag               {run_id, key, value}
    GET  /api/2.0/mlflow/metrics/get-history        ?run_id=&metric_key=&max_results=&page_token=

with a real workspace's rules where a client could trip over them: experiment names are
absolute workspace paths, a param once logged cannot change value, a log-batch holds at
most 1000 metrics, 100 params and 100 tags (1000 entries in all), runs/get carries each
metric's latest value; errors are Databricks JSON {"error_code", "message"} (404
RESOURCE_DOES_NOT_EXIST for an unknown experiment or run, 400 RESOURCE_ALREADY_EXISTS,
400 INVALID_PARAMETER_VALUE). Any other /api/2.0/mlflow endpoint is 404 ENDPOINT_NOT_FOUND
and lands in the workspace's `unknown` log. Auth (bearer token, 401) is the workspace's.

State is in memory: `experiments` by id, `runs` by id (each with `metrics` as a list of
(key, value, step, timestamp) in arrival order, `params`, `tags`), and `requests`, every
call as (method, endpoint, body or query). Tests read them through `experiment()`,
`runs_of()` and `history()`.
"""

from __future__ import annotations

import math
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tests.fakes.databricks_files import MLFLOW as PREFIX
from tests.fakes.databricks_files import ApiError, now_ms

ARTIFACT_ROOT = "dbfs:/databricks/mlflow-tracking"
MAX_METRICS, MAX_PARAMS, MAX_TAGS, MAX_ENTRIES = 1000, 100, 100, 1000
HISTORY_PAGE = 25000
RUN_STATUSES = ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED")


@dataclass
class Experiment:
    experiment_id: str
    name: str
    artifact_location: str
    tags: dict[str, str] = field(default_factory=dict)
    creation_time: int = field(default_factory=now_ms)

    def to_json(self) -> dict:
        return {
            "experiment_id": self.experiment_id,
            "name": self.name,
            "artifact_location": self.artifact_location,
            "lifecycle_stage": "active",
            "creation_time": self.creation_time,
            "last_update_time": self.creation_time,
            "tags": _pairs(self.tags),
        }


@dataclass
class Run:
    run_id: str
    experiment_id: str
    run_name: str
    user_id: str
    start_time: int
    artifact_uri: str
    status: str = "RUNNING"
    end_time: int | None = None
    metrics: list[tuple[str, float, int, int]] = field(default_factory=list)  # (key, value, step, timestamp)
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def info(self) -> dict:
        out = {
            "run_id": self.run_id,
            "run_uuid": self.run_id,
            "run_name": self.run_name,
            "experiment_id": self.experiment_id,
            "user_id": self.user_id,
            "status": self.status,
            "start_time": self.start_time,
            "artifact_uri": self.artifact_uri,
            "lifecycle_stage": "active",
        }
        if self.end_time is not None:
            out["end_time"] = self.end_time
        return out

    def latest(self) -> dict[str, tuple[str, float, int, int]]:
        """Each metric's latest point, as MLflow ranks them: highest step, then timestamp, then value."""
        out: dict[str, tuple[str, float, int, int]] = {}
        for m in self.metrics:
            best = out.get(m[0])
            if best is None or (m[2], m[3], m[1]) >= (best[2], best[3], best[1]):
                out[m[0]] = m
        return out

    def to_json(self) -> dict:
        data: dict[str, Any] = {}
        if self.metrics:
            data["metrics"] = [_metric(m) for m in self.latest().values()]
        if self.params:
            data["params"] = _pairs(self.params)
        if self.tags:
            data["tags"] = _pairs(self.tags)
        return {"info": self.info(), "data": data, "inputs": {}}


def _pairs(d: dict[str, str]) -> list[dict[str, str]]:
    return [{"key": k, "value": v} for k, v in d.items()]


def _metric(m: tuple[str, float, int, int]) -> dict:
    key, value, step, timestamp = m
    # proto3 JSON spells non-finite doubles as strings
    v: float | str = value
    if not math.isfinite(value):
        v = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    return {"key": key, "value": v, "timestamp": timestamp, "step": step}


def _required(body: dict, name: str) -> Any:
    value = body.get(name)
    if value in (None, ""):
        raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Missing value for required parameter '{name}'.")
    return value


class FakeMlflowTracking:
    """The workspace's MLflow state and semantics; the workspace's HTTP handler calls `handle()`."""

    def __init__(self, lock: threading.Lock, user: str = "me@example.com"):
        self.lock = lock
        self.user = user  # whom the token belongs to: every run's user_id
        self.experiments: dict[str, Experiment] = {}
        self.runs: dict[str, Run] = {}
        self.requests: list[tuple[str, str, dict]] = []  # (method, endpoint below PREFIX, body or query)
        self._next_experiment = 1234567890123456

    # ---- test-facing API ---------------------------------------------------------------
    def experiment(self, name: str) -> Experiment | None:
        with self.lock:
            return next((e for e in self.experiments.values() if e.name == name), None)

    def runs_of(self, experiment: Experiment | str) -> list[Run]:
        exp_id = experiment if isinstance(experiment, str) else experiment.experiment_id
        with self.lock:
            return [r for r in self.runs.values() if r.experiment_id == exp_id]

    def history(self, run: Run | str, key: str) -> list[tuple[float, int, int]]:
        """(value, step, timestamp) of one metric, in arrival order."""
        run_id = run if isinstance(run, str) else run.run_id
        with self.lock:
            return [(v, s, t) for k, v, s, t in self.runs[run_id].metrics if k == key]

    def endpoints(self) -> list[tuple[str, str]]:
        """The distinct (method, endpoint) called, in first-call order."""
        with self.lock:
            return list(dict.fromkeys((m, e) for m, e, _ in self.requests))

    # ---- dispatch (called with the lock held) ------------------------------------------
    def handle(self, method: str, endpoint: str, args: dict) -> dict:
        """Answer one call (the workspace has logged it); endpoint is the path below PREFIX, args
        the JSON body or the query."""
        handler = self.ROUTES.get((method, endpoint))
        if handler is None:
            raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{method} {PREFIX}{endpoint}'")
        return handler(self, args)

    def _experiment(self, exp_id: str) -> Experiment:
        exp = self.experiments.get(str(exp_id))
        if exp is None:
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Node ID {exp_id} does not exist.")
        return exp

    def _run(self, args: dict) -> Run:
        run_id = args.get("run_id") or args.get("run_uuid")
        if not run_id:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "Missing value for required parameter 'run_id'.")
        run = self.runs.get(run_id)
        if run is None:
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Run '{run_id}' not found.")
        return run

    # ---- experiments -------------------------------------------------------------------
    def _get_by_name(self, args: dict) -> dict:
        name = _required(args, "experiment_name")
        for exp in self.experiments.values():
            if exp.name == name:
                return {"experiment": exp.to_json()}
        raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Node named '{name}' does not exist.")

    def _get_experiment(self, args: dict) -> dict:
        return {"experiment": self._experiment(_required(args, "experiment_id")).to_json()}

    def _create_experiment(self, args: dict) -> dict:
        name = _required(args, "name")
        if not name.startswith("/"):
            raise ApiError(
                400,
                "INVALID_PARAMETER_VALUE",
                f"Got an invalid experiment name '{name}'. An experiment name must be an absolute path "
                "within the Databricks workspace, e.g. '/Users/<some-username>/my-experiment'.",
            )
        if any(e.name == name for e in self.experiments.values()):
            raise ApiError(400, "RESOURCE_ALREADY_EXISTS", f"Node named '{name}' already exists")
        exp_id = str(self._next_experiment)
        self._next_experiment += 1
        tags = {t["key"]: t.get("value", "") for t in args.get("tags") or []}
        location = args.get("artifact_location") or f"{ARTIFACT_ROOT}/{exp_id}"
        self.experiments[exp_id] = Experiment(exp_id, name, location, tags)
        return {"experiment_id": exp_id}

    # ---- runs --------------------------------------------------------------------------
    def _create_run(self, args: dict) -> dict:
        exp = self._experiment(_required(args, "experiment_id"))
        run_id = uuid.uuid4().hex
        tags = {t["key"]: t.get("value", "") for t in args.get("tags") or []}
        run_name = args.get("run_name") or tags.get("mlflow.runName") or f"run-{run_id[:8]}"
        tags["mlflow.runName"] = run_name
        run = Run(
            run_id,
            exp.experiment_id,
            run_name,
            self.user,
            int(args.get("start_time") or now_ms()),
            f"{exp.artifact_location}/{run_id}/artifacts",
            tags=tags,
        )
        self.runs[run_id] = run
        return {"run": run.to_json()}

    def _get_run(self, args: dict) -> dict:
        return {"run": self._run(args).to_json()}

    def _update_run(self, args: dict) -> dict:
        run = self._run(args)
        status = args.get("status")
        if status is not None:
            if status not in RUN_STATUSES:
                raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Invalid run status '{status}'.")
            run.status = status
        if args.get("end_time") is not None:
            run.end_time = int(args["end_time"])
        if args.get("run_name"):
            run.run_name = run.tags["mlflow.runName"] = args["run_name"]
        return {"run_info": run.info()}

    def _search_runs(self, args: dict) -> dict:
        if args.get("order_by"):
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"the fake does not order runs by {args['order_by']}")
        ids = [str(i) for i in args.get("experiment_ids") or []]
        for exp_id in ids:
            self._experiment(exp_id)
        match = _run_filter(args.get("filter") or "")
        found = sorted(
            (r for r in self.runs.values() if r.experiment_id in ids and match(r)),
            key=lambda r: (-r.start_time, r.run_id),
        )
        size, start = int(args.get("max_results") or 1000), int(args.get("page_token") or 0)
        out: dict[str, Any] = {}
        if found[start : start + size]:
            out["runs"] = [r.to_json() for r in found[start : start + size]]
        if start + size < len(found):
            out["next_page_token"] = str(start + size)
        return out

    # ---- logging -----------------------------------------------------------------------
    def _log_params(self, run: Run, params: list[dict]) -> None:
        for p in params:
            key, value = _required(p, "key"), str(p.get("value", ""))
            old = run.params.get(key)
            if old is not None and old != value:
                raise ApiError(
                    400,
                    "INVALID_PARAMETER_VALUE",
                    f"Changing param values is not allowed. Param with key='{key}' was already logged "
                    f"with value='{old}' for run ID='{run.run_id}'. Attempted logging new value '{value}'.",
                )
        run.params.update({p["key"]: str(p.get("value", "")) for p in params})

    def _log_metrics(self, run: Run, metrics: list[dict]) -> None:
        points = []
        for m in metrics:
            key = _required(m, "key")
            if "value" not in m or "timestamp" not in m:
                raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Metric '{key}' needs a value and a timestamp.")
            points.append((key, float(m["value"]), int(m.get("step") or 0), int(m["timestamp"])))
        run.metrics.extend(points)

    def _log_tags(self, run: Run, tags: list[dict]) -> None:
        for t in tags:
            run.tags[_required(t, "key")] = str(t.get("value", ""))
            if t["key"] == "mlflow.runName":
                run.run_name = run.tags["mlflow.runName"]

    def _log_batch(self, args: dict) -> dict:
        run = self._run(args)
        metrics, params, tags = args.get("metrics") or [], args.get("params") or [], args.get("tags") or []
        for what, items, limit in (
            ("metrics", metrics, MAX_METRICS),
            ("params", params, MAX_PARAMS),
            ("tags", tags, MAX_TAGS),
        ):
            if len(items) > limit:
                raise ApiError(
                    400,
                    "INVALID_PARAMETER_VALUE",
                    f"A batch logging request can contain at most {limit} {what}. Got {len(items)} {what}.",
                )
        if len(metrics) + len(params) + len(tags) > MAX_ENTRIES:
            raise ApiError(
                400,
                "INVALID_PARAMETER_VALUE",
                f"A batch logging request can contain at most {MAX_ENTRIES} metrics, params, and tags in "
                f"total. Got {len(metrics) + len(params) + len(tags)}.",
            )
        self._log_params(run, params)
        self._log_metrics(run, metrics)
        self._log_tags(run, tags)
        return {}

    def _log_metric(self, args: dict) -> dict:
        self._log_metrics(self._run(args), [args])
        return {}

    def _log_parameter(self, args: dict) -> dict:
        self._log_params(self._run(args), [args])
        return {}

    def _set_tag(self, args: dict) -> dict:
        self._log_tags(self._run(args), [args])
        return {}

    def _get_history(self, args: dict) -> dict:
        run, key = self._run(args), _required(args, "metric_key")
        points = [m for m in run.metrics if m[0] == key]
        size = min(int(args.get("max_results") or HISTORY_PAGE), HISTORY_PAGE)
        start = int(args.get("page_token") or 0)
        out: dict[str, Any] = {}
        if points[start : start + size]:
            out["metrics"] = [_metric(m) for m in points[start : start + size]]
        if start + size < len(points):
            out["next_page_token"] = str(start + size)
        return out

    ROUTES: ClassVar[dict[tuple[str, str], Callable[[FakeMlflowTracking, dict], dict]]] = {
        ("GET", "/experiments/get-by-name"): _get_by_name,
        ("GET", "/experiments/get"): _get_experiment,
        ("POST", "/experiments/create"): _create_experiment,
        ("POST", "/runs/create"): _create_run,
        ("GET", "/runs/get"): _get_run,
        ("POST", "/runs/update"): _update_run,
        ("POST", "/runs/search"): _search_runs,
        ("POST", "/runs/log-batch"): _log_batch,
        ("POST", "/runs/log-metric"): _log_metric,
        ("POST", "/runs/log-parameter"): _log_parameter,
        ("POST", "/runs/set-tag"): _set_tag,
        ("GET", "/metrics/get-history"): _get_history,
    }


_CLAUSE = re.compile(
    r"""^\s*(?:(tags|tag|attributes|attribute|attr|params|param)\.)?(`[^`]+`|"[^"]+"|[\w.\-]+)"""
    r"""\s*(=|!=)\s*('[^']*'|"[^"]*")\s*$"""
)


def _run_filter(text: str):
    """A predicate for a search filter: clauses `tags.K = 'v'`, `params.K = 'v'`, `attributes.run_name|status
    = 'v'` (or !=) joined by AND; anything else is refused, as a real server refuses what it cannot parse."""
    tests = []
    for clause in filter(str.strip, re.split(r"\s+and\s+", text, flags=re.IGNORECASE)):
        m = _CLAUSE.match(clause)
        if m is None:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Error on parsing filter '{text}' (the fake's subset)")
        kind, key, op, value = m.group(1) or "attributes", m.group(2).strip('`"'), m.group(3), m.group(4)[1:-1]
        if kind.startswith("tag"):

            def get(r: Run, key: str = key) -> str | None:
                return r.tags.get(key)
        elif kind.startswith("param"):

            def get(r: Run, key: str = key) -> str | None:
                return r.params.get(key)
        elif key in ("run_name", "status", "run_id", "user_id"):

            def get(r: Run, key: str = key) -> str | None:
                return getattr(r, key)
        else:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Invalid attribute key '{key}' in filter '{text}'")
        tests.append((get, op, value))

    def match(run: Run) -> bool:
        return all((get(run) == value) == (op == "=") for get, op, value in tests)

    return match

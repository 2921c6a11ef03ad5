"""A run's metric history from the workspace's MLflow (Feature.TRACKER_METRICS).

Our trainers name their MLflow run after the launcher run: the HF recipe's run_name and
Composer's both default to RUN_NAME, which the entrypoint sets, and transformers'
MLflowCallback and Composer's MLFlowLogger give it to MLflow (loggers.mlflow.run_name
overrides it). So a run's MLflow runs are found with runs/search in its experiment,
`attributes.run_name = '<name>'`, among those started after the launcher run was created (an
older one of that name is another run's). Searching, rather than having the driver record the
MLflow run id, asks nothing of the trainers or the cluster and finds the MLflow run of every
attempt; what it needs is the experiment, which the spec names where our trainers read it:
parameters.loggers.mlflow.experiment_name (the recipes' `loggers:` block), else
env_variables.MLFLOW_EXPERIMENT_NAME. A run that logs elsewhere (a tracking_uri that is not
the workspace's) or names no experiment has no tracker runs here: its metric records are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from launcher.backends.capabilities import TrackerRun
from launcher.backends.databricks.errors import calls
from launcher.errors import NotFoundError

if TYPE_CHECKING:
    from databricks.sdk import WorkspaceClient

    from launcher.backends.base import Run
    from launcher.backends.databricks.profile import DatabricksProfile

HISTORY_PAGE = 25000
"""metrics/get-history's largest page (max_results); the SDK's iterator asks for the next one."""
CLOCK_SLACK_MS = 60_000
"""How much earlier than the launcher run's record an MLflow run may start and still be its
own: the workspace's clock and this machine's may differ a little."""


def where_logged(spec: Mapping[str, Any], run_name: str) -> tuple[str | None, str]:
    """(the workspace experiment the run's trainer logs to, or None; the MLflow run name)."""
    loggers = (spec.get("parameters") or {}).get("loggers") or {}
    mlflow = loggers.get("mlflow") if isinstance(loggers, Mapping) else None
    mlflow = mlflow if isinstance(mlflow, Mapping) else {}
    if mlflow.get("tracking_uri") not in (None, "", "databricks"):
        return None, run_name  # another tracking server: not this workspace's
    experiment = mlflow.get("experiment_name") or (spec.get("env_variables") or {}).get("MLFLOW_EXPERIMENT_NAME")
    return (str(experiment) if experiment else None), str(mlflow.get("run_name") or run_name)


def tracker_runs(w: WorkspaceClient, profile: DatabricksProfile, run: Run) -> list[TrackerRun]:
    """The MLflow runs of `run`, oldest first, each with every metric's whole history."""
    experiment, mlflow_name = where_logged(run.spec, run.name)
    if experiment is None or "'" in mlflow_name:
        return []
    since = int(run.created_at.timestamp() * 1000) - CLOCK_SLACK_MS
    try:
        with calls(profile.where, f"reading the MLflow experiment {experiment}"):
            found_experiment = w.experiments.get_by_name(experiment).experiment
    except NotFoundError:
        return []  # the trainer has not made it yet
    experiment_id = found_experiment.experiment_id if found_experiment else None
    if not experiment_id:
        return []
    with calls(profile.where, f"searching {experiment} for the MLflow runs of {run.name}"):
        found = [
            r
            for r in w.experiments.search_runs(
                experiment_ids=[experiment_id], filter=f"attributes.run_name = '{mlflow_name}'"
            )
            if r.info and r.info.run_id and (r.info.start_time or 0) >= since
        ]
    found.sort(key=lambda r: r.info.start_time or 0)  # type: ignore[union-attr]
    out = []
    for r in found:
        run_id = r.info.run_id  # type: ignore[union-attr]
        keys = sorted({m.key for m in (r.data.metrics if r.data else None) or [] if m.key})
        history: dict[str, list[tuple[int, float, float]]] = {}
        for key in keys:
            with calls(profile.where, f"reading the history of {key} of MLflow run {run_id}"):
                history[key] = [
                    (int(m.step or 0), (m.timestamp or 0) / 1000, float(m.value))
                    for m in w.experiments.get_history(key, run_id=run_id, max_results=HISTORY_PAGE)
                    if m.value is not None
                ]
        started = r.info.start_time  # type: ignore[union-attr]
        out.append(
            TrackerRun(
                f"MLflow run {run_id}",
                datetime.fromtimestamp(started / 1000, UTC) if started else None,
                history,
            )
        )
    return out

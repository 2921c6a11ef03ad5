"""`launcher metrics RUN --to mlflow|tensorboard DEST`: a run's records into a tracker, for
runs that trained without one.

- mlflow: DEST is a tracking URI (file:./mlruns, http://host:5000, databricks). One MLflow
  run per launcher run, named after it, in the experiment `--experiment` (default
  "launcher"), every point with its step and time, through MlflowClient.log_batch.
- tensorboard: DEST is a log directory; event files go to DEST/<run> (tensorboardX, no
  TensorFlow needed).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import InputError, LauncherError, connection_failure, file_boundary

TARGETS = ("mlflow", "tensorboard")
BATCH = 1000  # MLflow's log_batch takes at most 1000 metrics per call
EXTRA = "pip install 'launcher[trackers]'"


@dataclass(frozen=True)
class Exported:
    run: str
    points: int
    metrics: int
    where: str


def _points(series: Any) -> Iterable[tuple[int, float, float]]:
    return zip(series.steps, series.values, series.times, strict=False)


def allow_file_store(uri: str | None) -> None:
    """MLflow 3 refuses its file store unless told; a `file:` URI (or a bare path) given on
    purpose is that."""
    if uri and (uri.startswith("file:") or ("://" not in uri and uri != "databricks")):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")


# MLflow's own defaults wait 120 s per request and retry 7 times with a backoff doubling
# from 2 s: a refused port took 249 s to fail. Each request here gets 30 s (connect and
# read) and 2 retries without backoff (a 429's Retry-After is still honoured), so a
# tracker that is down fails within a second and a request that hangs within about 91 s.
# A value the user set in the environment wins.
MLFLOW_HTTP = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
}


def bound_mlflow_requests() -> None:
    """MLflow reads these at each request (os.environ: the CLI is one command)."""
    for name, value in MLFLOW_HTTP.items():
        os.environ.setdefault(name, value)


def _mlflow_failure(e: BaseException, uri: str) -> LauncherError:
    """One line: MLflow's text of an unreachable server runs to several nested reprs."""
    text = str(e)
    # MlflowException keeps only the text of the requests error it caught.
    if "Max retries exceeded" in text or "Failed to establish a new connection" in text or "timed out" in text:
        return InputError(
            f"--to mlflow {uri}: cannot reach the tracking server: {connection_failure(e).words}",
            hint="check the URI and that the server is up",
        )
    return LauncherError(
        f"--to mlflow {uri}: {text.strip().splitlines()[0][:300] if text.strip() else type(e).__name__}"
    )


def to_mlflow(rm: Any, uri: str, experiment: str = "launcher") -> Exported:
    try:
        from mlflow.entities import Metric
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise InputError(f"--to mlflow needs mlflow: {EXTRA}") from None
    allow_file_store(uri)
    bound_mlflow_requests()
    try:
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name(experiment)
        exp_id = exp.experiment_id if exp is not None else client.create_experiment(experiment)
        run = client.create_run(exp_id, run_name=rm.run, tags={"launcher.run": rm.run, "launcher.source": rm.source})
        points = [
            Metric(name, float(v), int(t * 1000), int(step))
            for name, s in rm.series.items()
            for step, v, t in _points(s)
        ]
        for i in range(0, len(points), BATCH):
            client.log_batch(run.info.run_id, metrics=points[i : i + BATCH])
        client.set_terminated(run.info.run_id, "FINISHED")
    except MlflowException as e:
        raise _mlflow_failure(e, uri) from None
    return Exported(rm.run, len(points), len(rm.series), f"{uri} (experiment {experiment}, run {run.info.run_id})")


def to_tensorboard(rm: Any, logdir: str) -> Exported:
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        raise InputError(f"--to tensorboard needs tensorboardX: {EXTRA}") from None
    target = Path(logdir).expanduser() / rm.run
    n = 0
    with file_boundary(target, "write TensorBoard events to"):
        writer = SummaryWriter(logdir=str(target))
        try:
            for name, s in rm.series.items():
                for step, v, t in _points(s):
                    writer.add_scalar(name, float(v), global_step=int(step), walltime=float(t))
                    n += 1
        finally:
            writer.close()
    return Exported(rm.run, n, len(rm.series), str(target))


def export(rm: Any, target: str, dest: str, experiment: str = "launcher") -> Exported:
    if target not in TARGETS:
        raise InputError(f"--to must be one of {', '.join(TARGETS)}, got {target!r}")
    if not rm.series:
        raise InputError(f"run {rm.run} has no metrics to export ({rm.status})")
    return to_mlflow(rm, dest, experiment) if target == "mlflow" else to_tensorboard(rm, dest)

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

from launcher.errors import InputError, LauncherError, file_boundary

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
    return zip(series.steps, series.values, series.times)


def allow_file_store(uri: str | None) -> None:
    """MLflow 3 refuses its file store unless told; a `file:` URI (or a bare path) given on
    purpose is that."""
    if uri and (uri.startswith("file:") or ("://" not in uri and uri != "databricks")):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")


def to_mlflow(rm: Any, uri: str, experiment: str = "launcher") -> Exported:
    try:
        from mlflow.entities import Metric
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise InputError(f"--to mlflow needs mlflow: {EXTRA}") from None
    allow_file_store(uri)
    try:
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name(experiment)
        exp_id = exp.experiment_id if exp is not None else client.create_experiment(experiment)
        run = client.create_run(exp_id, run_name=rm.run, tags={"launcher.run": rm.run, "launcher.source": rm.source})
        points = [Metric(name, float(v), int(t * 1000), int(step)) for name, s in rm.series.items()
                  for step, v, t in _points(s)]
        for i in range(0, len(points), BATCH):
            client.log_batch(run.info.run_id, metrics=points[i : i + BATCH])
        client.set_terminated(run.info.run_id, "FINISHED")
    except MlflowException as e:
        raise LauncherError(f"--to mlflow {uri}: {str(e).splitlines()[0]}") from None
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

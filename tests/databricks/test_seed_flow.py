"""The seed's flow end to end against the fake workspace program (issue 39's "done when"):
runspecs/hf-finetune-volume.yaml, a Hugging Face fine-tuning of a tiny BERT-style classifier
by the built-in HF recipe on 2 processes under TorchDistributor (gloo, CPU), its dataset and
tokenizer read from a Volume, its checkpoints written there, the workspace credentials
through the run's secret scope; `launcher run --follow` shows its statuses and logs and
exits 0, and `launcher metrics` shows its loss curve from MLflow. The same YAML then runs
unchanged on the local backend and on the fake Kubernetes cluster."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from tests.conftest import needs
from tests.databricks.test_runs import submitted
from tests.train.conftest import REPO

needs("torch")
needs("pyspark")
needs("transformers", reason="needs the train extra")
needs("mlflow")

pytestmark = [pytest.mark.train, pytest.mark.slow]

SPEC = REPO / "runspecs" / "hf-finetune-volume.yaml"
ON_VOLUME = "/Volumes/main/default/training/sentiment"


@pytest.fixture(scope="module")
def sentiment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Reviews with string labels, a WordPiece trained on them, prepared with `launcher data prepare`."""
    from launcher.data.prepare import prepare
    from launcher.data.synthetic import write_sentiment
    from launcher.data.tokenizer import train_wordpiece

    root = tmp_path_factory.mktemp("sentiment")
    write_sentiment(root / "reviews.jsonl", 400, seed=0)
    tok = train_wordpiece([str(root / "reviews.jsonl")], 200, root / "tokenizer")
    prepare([str(root / "reviews.jsonl")], str(root / "prepared"), str(tok), max_length=32, test_size=0.2)
    return {"tokenizer": Path(tok), "prepared": root / "prepared"}


def upload_tree(w, local: Path, remote: str) -> None:
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        w.files.upload(f"{remote}/{path.relative_to(local).as_posix()}", io.BytesIO(path.read_bytes()), overwrite=True)


def on_the_volume(cli, workspace, sentiment):
    """The seed's data and tokenizer on the fake workspace's Volume, a Volume for its
    checkpoints, and the `databricks` secret for that workspace; the workspace's client."""
    for volume in ("training", "checkpoints"):
        workspace.control("volume", {"catalog": "main", "schema": "default", "volume": volume})
    w = workspace.client()
    upload_tree(w, sentiment["prepared"], f"{ON_VOLUME}/prepared")
    upload_tree(w, sentiment["tokenizer"], f"{ON_VOLUME}/tokenizer")
    r = cli("secret", "create", "databricks", "--host", workspace.host, input=workspace.token)
    assert r.returncode == 0, r.stderr
    return w


def test_the_seed_flow_runs_end_to_end_on_databricks(cli, workspace, sentiment):
    w = on_the_volume(cli, workspace, sentiment)

    r = cli("run", "-f", str(SPEC), "--cluster", "dbx", "--follow", timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    name = submitted(out)
    # its statuses, and both processes' logs, each a node of its own
    assert re.search(rf"^STARTING +{name}", r.stderr, re.M) and re.search(rf"^RUNNING +{name}", r.stderr, re.M)
    assert f"Run {name} completed" in r.stderr
    # Each process a node of its own (TorchDistributor's barrier tasks, torchrun per task),
    # whose DDP all-reduces met: the training finished on both.
    for rank in (0, 1):
        assert f"[rank {rank}] [launcher] node rank {rank} of 2, 1 process(es) per node, WORLD_SIZE 2" in r.stdout
    assert "Finished distributed training with 2 executor processes" in r.stdout
    # the token went through the run's scope, never into the payload or the output
    payload = json.dumps([s for s in workspace.submits() if s["run_name"] == name])
    assert f"{{{{secrets/launcher-{name}/DATABRICKS_TOKEN}}}}" in payload
    assert workspace.token not in payload + out
    # the checkpoints are on the Volume
    saved = [e.name for e in w.files.list_directory_contents(f"/Volumes/main/default/checkpoints/{name}")]
    assert "checkpoint-8" in saved, saved

    logs = cli("logs", name, "--rank", "1")
    assert logs.returncode == 0, logs.stderr
    assert "node rank 1 of 2" in logs.stdout and "node rank 0 of 2" not in logs.stdout

    # the loss curve, from the MLflow run transformers' MLflowCallback logged (logging_steps 1)
    table = cli("metrics", name)
    assert table.returncode == 0, table.stderr
    assert "from MLflow run " in table.stdout + table.stderr, table.stdout
    curve = cli("metrics", name, "-o", "json")  # the default: the training loss
    assert curve.returncode == 0, curve.stderr
    points = json.loads(curve.stdout)
    assert {p["metric"] for p in points} == {"loss"}
    assert [p["step"] for p in points] == list(range(1, 9))
    assert all(0 < p["value"] < 2 for p in points)


def test_the_same_yaml_runs_unchanged_on_the_local_backend(cli, workspace, sentiment):
    """The seed's YAML, not a line changed, on this machine: its ranks read the dataset and the
    tokenizer from the same Volume and write their checkpoints there (the `databricks`
    secret's workspace), and `launcher metrics` shows the loss from the run's own records."""
    w = on_the_volume(cli, workspace, sentiment)

    r = cli("run", "-f", str(SPEC), "--cluster", "local", "--follow", timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    name = submitted(out)
    assert f"Run {name} completed" in r.stderr and workspace.token not in out
    saved = [e.name for e in w.files.list_directory_contents("/Volumes/main/default/checkpoints")]
    assert name in saved, saved
    curve = cli("metrics", name, "-o", "json")
    assert curve.returncode == 0, curve.stderr
    assert [p["step"] for p in json.loads(curve.stdout)] == list(range(1, 9))


def test_the_same_yaml_runs_unchanged_on_the_fake_kubernetes_cluster(cli, workspace, sentiment, fake_kube_factory):
    """The seed's YAML, not a line changed, on the fake Kubernetes cluster: two pods (the
    process runtime, whose unmapped image runs this machine's Python, which has torchrun),
    each a node rank under torchrun, reading the same Volume with the `databricks` secret,
    which lives in the cluster there."""
    w = on_the_volume(cli, workspace, sentiment)
    fake_kube_factory(runtime="process")  # the runc host images have no torchrun
    r = cli("secret", "create", "databricks", "--host", workspace.host, "--cluster", "fake", input=workspace.token)
    assert r.returncode == 0, r.stderr

    r = cli("run", "-f", str(SPEC), "--cluster", "fake", "--follow", timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    name = submitted(out)
    assert f"Run {name} completed" in r.stderr and workspace.token not in out
    for rank in (0, 1):
        assert f"node rank {rank} of 2" in cli("logs", name, "--rank", str(rank)).stdout
    saved = [e.name for e in w.files.list_directory_contents("/Volumes/main/default/checkpoints")]
    assert name in saved, saved

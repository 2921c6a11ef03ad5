"""A profile's retention_days: a submit deletes the finished runs of its namespace that ended
more than that many days ago (a page at a time), never a live one nor another namespace's;
retention_logs says whether their log archive goes too. Against the fake API server (no
controllers: the records stay as the launcher wrote them), with records made by the
launcher's own submit and stop, then aged as if they had been made 40 days ago."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml

from launcher import sdk
from launcher.backends.kubernetes.history import created_labels
from launcher.backends.kubernetes.retention import PRUNE_PAGE
from launcher.pod.logarchive import chunk_name
from tests.fakes.kube.fixtures import write_profile
from tests.kubernetes.test_cli import launcher

SPEC = {"name": "old", "image": "ghcr.io/example/launcher:test", "command": "true", "compute": {"gpu_type": "none"}}
CHUNK = chunk_name(0, 1_700_000_000_000)
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")


@pytest.fixture
def kube(fake_kube_factory):
    return fake_kube_factory(run_controllers=False, profile={"retention_days": 30})


def submit(name: str, cluster: str = "fake", *, stop: bool = True) -> str:
    run = sdk.create_run({**SPEC, "name": name}, cluster=cluster)
    if stop:
        sdk.stop_run(run)
    return run.name


def age(kube, name: str, days: int, ns: str = "default") -> None:
    """The record as it would be had the run been submitted and ended `days` days earlier:
    its creationTimestamp (which only the server sets: the fake's store, as time passing),
    the creation-time labels the launcher's submit wrote, and every time in its annotations
    (the outcome and the attempts a stop recorded)."""

    def earlier(stamp: str) -> str:
        at = datetime.fromisoformat(stamp) - timedelta(days=days)
        return at.strftime("%Y-%m-%dT%H:%M:%SZ") if stamp.endswith("Z") else at.isoformat()

    def shift(record: dict) -> None:
        meta = record["metadata"]
        meta["creationTimestamp"] = earlier(meta["creationTimestamp"])
        meta["labels"].update(created_labels(datetime.fromisoformat(meta["creationTimestamp"])))
        for key, value in (meta.get("annotations") or {}).items():
            meta["annotations"][key] = STAMP.sub(lambda m: earlier(m.group(0)), value)

    kube.update("ConfigMap", ns, name, shift)


def names(cluster: str = "fake") -> set[str]:
    return {r.name for r in sdk.get_runs(cluster=cluster)}


def test_a_submit_prunes_the_finished_runs_past_retention_days_and_nothing_else(kube, launcher_home: Path):
    write_profile(launcher_home, kube, name="other", namespace="other-ns", retention_days=30)
    old = submit("old")
    live = submit("old-live", stop=False)  # PENDING: no controller starts it
    recent = submit("recent")
    theirs = submit("theirs", "other")
    for name in (old, live):
        age(kube, name, 40)
    age(kube, theirs, 40, "other-ns")
    assert {old, live, recent} <= names()

    new = submit("new", stop=False)
    assert kube.store.objects.get(("ConfigMap", "default", old)) is None, "the old finished run's record is gone"
    assert names() == {live, recent, new}
    assert names("other") == {theirs}, "another namespace's runs are its own profile's to prune"


def test_a_submit_deletes_a_page_of_old_runs_at_most(kube):
    old = [submit("old") for _ in range(PRUNE_PAGE + 3)]
    for name in old:
        age(kube, name, 40)
    first = submit("new", stop=False)
    left = names() & set(old)
    assert len(left) == 3, "one submit deletes PRUNE_PAGE runs, the oldest first"
    second = submit("new", stop=False)
    assert names() == {first, second}


@pytest.mark.parametrize("logs", ["keep", "delete"])
def test_retention_logs_keeps_or_deletes_the_log_archive(fake_kube_factory, tmp_path: Path, logs: str):
    store = tmp_path / "log-store"
    store.mkdir()
    profile = {"retention_days": 30, "retention_logs": logs, "log_store": str(store)}
    kube = fake_kube_factory(run_controllers=False, profile=profile)
    run = sdk.create_run({**SPEC, "name": "archived"}, cluster="fake")
    name = run.name
    # What each rank's entrypoint writes there (launcher.pod.logarchive), by hand: no pods run here.
    chunk = store / name / "attempt-1" / "rank-0" / CHUNK
    chunk.parent.mkdir(parents=True)
    chunk.write_text("hello\n")
    sdk.stop_run(run)
    age(kube, name, 40)

    submit("new", stop=False)
    assert name not in names()
    if logs == "keep":
        assert chunk.read_text() == "hello\n"
    else:
        assert not (store / name).exists() and store.exists()


def test_cluster_add_takes_retention_days(fake_kube, launcher_home: Path, capsys):
    kubeconfig = str(launcher_home / "kubeconfig")
    assert launcher("cluster", "add", "kept", "--kubeconfig", kubeconfig, "--retention-days", "30") == 0
    config = yaml.safe_load((launcher_home / "config.yaml").read_text())
    assert config["clusters"]["kept"]["retention_days"] == 30
    capsys.readouterr()
    args = ("cluster", "add", "never", "--kubeconfig", kubeconfig, "--retention-days", "0")
    assert launcher(*args) == 2
    err = capsys.readouterr().err
    assert "clusters.never.retention_days" in err and "Traceback" not in err, err
    assert launcher("cluster", "add", "bad", "--retention-logs", "shred") == 2

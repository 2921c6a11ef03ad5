"""`get runs` on Kubernetes costs what it shows: the filters and the limit go to the API
server (label selectors, limit/continue pages of the records' metadata), and only the
runs a listing shows are read whole. Observed through the fake API server's list log
(kube.lists), against records made by the launcher's own submit."""

from __future__ import annotations

import copy
import json

import pytest

from launcher import sdk
from tests.kubernetes.test_cli import launcher

MANAGED = "app.kubernetes.io/managed-by=launcher"
SPEC = {"name": "hist", "image": "ghcr.io/example/launcher:test", "command": "true", "compute": {"gpu_type": "none"}}


@pytest.fixture
def kube(fake_kube_factory):
    # No controllers: the records stay as submitted, and nothing but the launcher writes.
    return fake_kube_factory(run_controllers=False)


def submit(n: int, name: str = "hist") -> list[str]:
    return [sdk.create_run({**SPEC, "name": name}, cluster="fake").name for _ in range(n)]


def whole_reads(kube, start: int) -> list[dict]:
    """The list calls since `start` that read ConfigMaps whole (spec, parameters)."""
    return [c for c in kube.lists[start:] if c["kind"] == "ConfigMap" and not c["metadataOnly"]]


def test_a_status_filter_with_a_limit_reads_the_metadata_in_pages_and_only_the_shown_runs(kube, capsys):
    submit(60)
    stopped = submit(8, "stopme")
    for name in stopped:
        sdk.stop_run(name)
    submit(60)
    start = len(kube.lists)
    capsys.readouterr()
    assert launcher("get", "runs", "--status", "STOPPED", "--limit", "5", "-o", "name") == 0
    shown = capsys.readouterr().out.split()
    assert len(shown) == 5 and set(shown) <= set(stopped)
    lists = kube.lists[start:]
    # The records' metadata a window of time at a time, by their creation-time labels, and
    # the runs of a launcher from before the labels (none here) by their absence.
    metadata = [c for c in lists if c["kind"] == "ConfigMap" and c["metadataOnly"]]
    assert metadata[0]["labelSelector"] == f"{MANAGED},!launcher.dev/created-second"
    assert all(
        c["labelSelector"].startswith(MANAGED + ",launcher.dev/created-") and " in (" in c["labelSelector"]
        for c in metadata[1:]
    )
    assert all(c["limit"] == 500 for c in metadata)
    # The records read whole are the candidates' alone, by name, a batch of 50 at a time:
    # the 60 newer runs (not stopped) fill the first batch, the page fills in the second.
    whole = whole_reads(kube, start)
    assert whole and all(c["labelSelector"].startswith(MANAGED + ",launcher.dev/run in (") for c in whole)
    assert 1 <= len(whole) <= 2
    # Newest first: the last five stopped, as the listing without a limit orders them.
    assert shown == [r.name for r in sdk.get_runs(status="STOPPED")][:5]


def test_ids_become_a_label_selector(kube, capsys):
    names = submit(3)
    start = len(kube.lists)
    runs = sdk.get_runs(ids=[names[0]], limit=50)
    assert [r.name for r in runs] == [names[0]]
    metadata = [c for c in kube.lists[start:] if c["metadataOnly"]]
    assert metadata and all(c["labelSelector"].startswith(f"{MANAGED},launcher.dev/run in ({names[0]})") for c in metadata)


def test_pages_of_a_long_history_come_newest_first_without_duplicates(kube):
    """1,100 records (past two pages of 500): copies of a submitted run's record, as another
    machine's launcher leaves them (many in one second: ties go by name, newest first)."""
    [first] = submit(1)
    record = kube.get("ConfigMap", "default", first)
    for i in range(1100):
        copied = copy.deepcopy(record)
        name = f"copy-{i:04d}-{'abcdef'[i % 6]}zzzzz"
        meta = copied["metadata"]
        for key in ("uid", "resourceVersion", "creationTimestamp", "ownerReferences"):
            meta.pop(key, None)
        meta["name"], meta["labels"]["launcher.dev/run"] = name, name
        spec = json.loads(copied["data"]["spec.json"])
        spec["name"] = name
        copied["data"]["spec.json"] = json.dumps(spec)
        kube.create("ConfigMap", "default", copied)
    start = len(kube.lists)
    everything = sdk.get_runs()
    paged = sdk.get_runs(limit=120)
    assert [r.name for r in paged] == [r.name for r in everything][:120]
    assert len({r.name for r in paged}) == 120
    stamps = [r.created_at for r in paged]
    assert stamps == sorted(stamps, reverse=True)
    continued = [c for c in kube.lists[start:] if c["metadataOnly"] and c["kind"] == "ConfigMap" and c["continue"]]
    assert len(continued) == 2  # 1,101 records: three pages
    # The unlimited listing reads every record in one list; the page of 120, its 120 alone.
    assert [c["labelSelector"].count(",") for c in whole_reads(kube, start)] == [0, 1 + 119]

"""The fake API server's protocol, checked as a client sees it over HTTP: bookmarks,
410 Gone after compaction and from a bounded history, limit/continue, cluster-wide lists,
Tables, pod log filters, deletion policies and the DisruptionTarget of an eviction."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import wait_until
from tests.fakes.kube.cluster import FakeKube
from tests.fakes.kube.common import rfc3339

CM = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
def kube():
    k = FakeKube(grace_seconds=1.0).start()
    try:
        yield k
    finally:
        k.close()


def call(kube, path: str, method: str = "GET", body=None, accept: str | None = None):
    req = urllib.request.Request(
        kube.url + path,
        method=method,
        data=json.dumps(body).encode() if body else None,
        headers={"Content-Type": "application/json", **({"Accept": accept} if accept else {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def events(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line]


def make_config_maps(kube, n: int, ns: str = "default") -> None:
    for i in range(n):
        kube.create("ConfigMap", ns, {"metadata": {"name": f"cm-{i}"}, "data": {"i": str(i)}})


def test_watch_sends_bookmarks_only_when_asked(kube):
    rv = json.loads(call(kube, CM)[1])["metadata"]["resourceVersion"]
    _, text = call(kube, f"{CM}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=2")
    marks = [e for e in events(text) if e["type"] == "BOOKMARK"]
    assert marks and all(
        e["object"]["kind"] == "ConfigMap" and int(e["object"]["metadata"]["resourceVersion"]) >= int(rv) for e in marks
    )
    _, text = call(kube, f"{CM}?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    assert events(text) == []


def test_watch_from_a_compacted_version_is_410_gone(kube):
    rv = json.loads(call(kube, CM)[1])["metadata"]["resourceVersion"]
    make_config_maps(kube, 2)
    _, text = call(kube, f"{CM}?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    assert [e["type"] for e in events(text)] == ["ADDED", "ADDED"]  # replayed from history
    kube.compact()
    status, text = call(kube, f"{CM}?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    assert status == 200 and [(e["type"], e["object"]["code"]) for e in events(text)] == [("ERROR", 410)]
    assert "too old resource version" in events(text)[0]["object"]["message"]
    status, text = call(kube, f"{CM}?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert status == 410


def test_a_bounded_history_forgets_old_events():
    kube = FakeKube(run_controllers=False, history_limit=5).start()
    try:
        rv = kube.rv
        make_config_maps(kube, 8)
        _, text = call(kube, f"{CM}?watch=true&resourceVersion={rv}&timeoutSeconds=1")
        assert [e["type"] for e in events(text)] == ["ERROR"]
        _, text = call(kube, f"{CM}?watch=true&resourceVersion={kube.rv - 3}&timeoutSeconds=1")
        assert [e["object"]["metadata"]["name"] for e in events(text)] == ["cm-5", "cm-6", "cm-7"]
    finally:
        kube.close()


def test_limit_and_continue_page_through_and_expire(kube):
    make_config_maps(kube, 5)
    names, token, pages = [], "", 0
    while True:
        page = json.loads(call(kube, f"{CM}?limit=2" + (f"&continue={token}" if token else ""))[1])
        names += [o["metadata"]["name"] for o in page["items"]]
        pages += 1
        token = page["metadata"].get("continue")
        if not token:
            break
        assert page["metadata"]["remainingItemCount"] == 5 - len(names)
    assert (names, pages) == ([f"cm-{i}" for i in range(5)], 3)
    first = json.loads(call(kube, f"{CM}?limit=2")[1])
    make_config_maps(kube, 1, "elsewhere")  # the store moves on, then its history is compacted
    kube.compact()
    status, text = call(kube, f"{CM}?limit=2&continue={first['metadata']['continue']}")
    assert status == 410 and json.loads(text)["reason"] == "Expired"


def test_a_continued_list_shows_the_objects_as_of_its_first_page(kube):
    make_config_maps(kube, 5)
    first = json.loads(call(kube, f"{CM}?limit=2")[1])
    rv = first["metadata"]["resourceVersion"]
    kube.create("ConfigMap", "default", {"metadata": {"name": "cm-9"}})  # created since: not on this list
    kube.delete("ConfigMap", "default", "cm-3")  # deleted since: still on it
    kube.patch("ConfigMap", "default", "cm-4", {"data": {"i": "changed"}})  # changed since: as it was
    names, token, data = [o["metadata"]["name"] for o in first["items"]], first["metadata"]["continue"], {}
    while token:
        page = json.loads(call(kube, f"{CM}?limit=2&continue={token}")[1])
        assert page["metadata"]["resourceVersion"] == rv
        names += [o["metadata"]["name"] for o in page["items"]]
        data.update({o["metadata"]["name"]: o["data"]["i"] for o in page["items"]})
        token = page["metadata"].get("continue")
    assert names == ["cm-0", "cm-1", "cm-2", "cm-3", "cm-4"] and data["cm-4"] == "4"
    fresh = json.loads(call(kube, CM)[1])
    assert [o["metadata"]["name"] for o in fresh["items"]] == ["cm-0", "cm-1", "cm-2", "cm-4", "cm-9"]


def test_a_metadata_only_list_answers_partial_object_metadata(kube):
    make_config_maps(kube, 3)
    accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json"
    page = json.loads(call(kube, f"{CM}?limit=2", accept=accept)[1])
    assert page["kind"] == "PartialObjectMetadataList" and page["metadata"]["remainingItemCount"] == 1
    assert [(o["kind"], o["metadata"]["name"], "data" in o) for o in page["items"]] == [
        ("PartialObjectMetadata", "cm-0", False),
        ("PartialObjectMetadata", "cm-1", False),
    ]
    assert kube.lists[-1] == {
        "kind": "ConfigMap",
        "labelSelector": None,
        "limit": 2,
        "continue": False,
        "metadataOnly": True,
    }


def test_cluster_wide_lists_and_tables(kube):
    make_config_maps(kube, 1, "team-a")
    make_config_maps(kube, 1, "team-b")
    listing = json.loads(call(kube, "/api/v1/configmaps")[1])
    assert sorted(o["metadata"]["namespace"] for o in listing["items"]) == ["team-a", "team-b"]
    assert {"team-a", "team-b"} <= {
        o["metadata"]["name"] for o in json.loads(call(kube, "/api/v1/namespaces")[1])["items"]
    }
    table = json.loads(call(kube, "/api/v1/configmaps", accept="application/json;as=Table;v=v1;g=meta.k8s.io")[1])
    assert table["kind"] == "Table" and [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert [r["cells"][:2] for r in table["rows"]] == [["cm-0", 1], ["cm-0", 1]]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def pod(name: str, script: str) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script]}],
        },
    }


def test_pod_logs_since_time_tail_and_timestamps(kube):
    kube.create("Pod", "default", pod("talker", "echo early; sleep 1.2; echo late one; echo late two"))
    wait_until(
        lambda: kube.get("Pod", "default", "talker")["status"]["phase"] == "Succeeded",
        20,
        message="pod talker to succeed",
    )
    path = "/api/v1/namespaces/default/pods/talker/log"
    _, stamped = call(kube, f"{path}?timestamps=true")
    assert [line.split(" ", 1)[1] for line in stamped.splitlines()] == ["early", "late one", "late two"]
    cut = stamped.splitlines()[1].split(" ", 1)[0]  # the first late line's own timestamp
    assert call(kube, f"{path}?sinceTime={cut}")[1].splitlines() == ["late one", "late two"]
    assert call(kube, f"{path}?tailLines=1")[1] == "late two\n"
    assert call(kube, f"{path}?sinceTime={rfc3339(time.time_ns() + 10**10)}")[1] == ""
    status, text = call(kube, f"{path}?container=sidecar")
    assert status == 400 and "container sidecar is not valid for pod talker" in text


def test_orphan_keeps_pods_and_eviction_marks_a_disruption(kube):
    kube.create(
        "Job",
        "default",
        {
            "metadata": {"name": "keep"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "30"]}],
                    }
                }
            },
        },
    )
    running = wait_until(
        lambda: [p for p in kube.pods() if p["status"].get("phase") == "Running"], 20, message="the Job's pod to run"
    )
    status, _ = call(kube, "/apis/batch/v1/namespaces/default/jobs/keep", "DELETE", {"propagationPolicy": "Orphan"})
    assert status == 200
    wait_until(lambda: not kube.list("Job", "default")[0], 20, message="the Job to be deleted")
    left = kube.get("Pod", "default", running[0]["metadata"]["name"])
    assert "ownerReferences" not in left["metadata"] and left["status"]["phase"] == "Running"
    kube.evict(left["metadata"]["name"])
    after = wait_until(
        lambda: (p := kube.get("Pod", "default", left["metadata"]["name"]))["status"]["phase"] == "Failed" and p,
        20,
        message="the evicted pod to fail",
    )
    cond = next(c for c in after["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler")
    assert after["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137


def test_it_answers_when_the_process_has_more_than_1024_files_open():
    """select() refuses a descriptor past FD_SETSIZE (1024): a test process that has opened
    many files (streaming's shared memory) must still reach the fake it starts then."""
    import gc
    import os
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        pytest.skip(f"the open-files limit is {soft}")
    # A socket an earlier test left to the garbage collector must not free a number below
    # 1024 while the fake starts: collect it before the gaps are filled.
    gc.collect()
    held = [os.open(os.devnull, os.O_RDONLY)]
    while held[-1] <= 1030 and len(held) < 1100:  # the lowest free number comes first: fill every gap below
        held.append(os.open(os.devnull, os.O_RDONLY))
    try:
        k = FakeKube(grace_seconds=1.0).start()
        try:
            assert k.server.socket.fileno() > 1024
            assert call(k, CM)[0] == 200
        finally:
            k.close()
    finally:
        for fd in held:
            os.close(fd)


def test_openapi_documents_hold_every_served_kind_and_every_schema_they_refer_to():
    """What kubectl reads: /openapi/v3 lists a document per group-version whose schemas
    include each served kind (by x-kubernetes-group-version-kind) and whatever it refers
    to; /openapi/v2 (JSON here, protobuf for kubectl) holds the same kinds."""
    kube = FakeKube(jobset=True).start()
    try:
        status, listing = call(kube, "/openapi/v3")
        assert status == 200
        gvk = "x-kubernetes-group-version-kind"
        served = set()
        for entry in json.loads(listing)["paths"].values():
            status, text = call(kube, entry["serverRelativeURL"])
            assert status == 200
            schemas = json.loads(text)["components"]["schemas"]
            refs = set(re.findall(r'"#/components/schemas/([^"]+)"', text))
            assert refs <= set(schemas), refs - set(schemas)  # nothing a client would fail to resolve
            served |= {(g["group"], g["version"], g["kind"]) for s in schemas.values() for g in s.get(gvk, [])}
        wanted = {(r.group, r.version, r.kind) for r in kube.registry.resources}
        assert wanted <= served, wanted - served
        status, text = call(kube, "/openapi/v2", accept="application/json")
        v2 = json.loads(text)
        assert status == 200 and v2["swagger"] == "2.0"
        kinds = {(g["group"], g["version"], g["kind"]) for s in v2["definitions"].values() for g in s.get(gvk, [])}
        assert wanted <= kinds, wanted - kinds
        assert set(re.findall(r'"#/definitions/([^"]+)"', text)) <= set(v2["definitions"])
        status, text = call(kube, "/openapi/v3/apis/apps/v1")
        assert status == 404
    finally:
        kube.close()

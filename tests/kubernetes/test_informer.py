"""The informer against the fake API server: 410 Gone and ERROR events relist at once,
and its backoff starts small again after a success."""

from __future__ import annotations

import pytest

from launcher.backends.kubernetes.informer import BACKOFF_FIRST, Informer
from launcher.backends.kubernetes.kubeapi import DEFAULT_RETRY, KubeApi
from launcher.backends.kubernetes.profiles import load_profile
from launcher.config import load_config
from tests.conftest import wait_until


@pytest.fixture
def api(fake_kube):
    a = KubeApi(load_profile(load_config().profile("fake")))
    yield a
    a.close()


def configmap(name: str) -> dict:
    return {"metadata": {"name": name, "labels": {"app": "informed"}}, "data": {}}


def wait_seen(inf: Informer, name: str, seconds: float) -> dict:
    return wait_until(lambda: inf.get(name), seconds, interval=0.02, message=f"the informer to see ConfigMap {name}")


def test_watches_answered_410_gone_relist_at_once(fake_kube, api):
    inf = Informer(api, "ConfigMap", "app=informed", lambda: None, watch_seconds=1).start()
    try:
        inf.wait_synced("watch the test's ConfigMaps")
        lists = fake_kube.count(verb="list", kind="ConfigMap")
        fake_kube.faults.gone_watches = 6
        # The open watch ends within 1 s; then six 410s, each followed by a list and a new
        # watch at once. Treated as failures
        # with backoff (0.2 s doubling), they would take over 10 s.
        wait_until(
            lambda: fake_kube.faults.gone_watches == 0, 5.0, interval=0.02, message="the six 410s to be answered"
        )
        fake_kube.create("ConfigMap", "default", configmap("after-gone"))
        wait_seen(inf, "after-gone", 2.0)
        assert fake_kube.count(verb="list", kind="ConfigMap") - lists >= 6  # a fresh list after each
        assert inf.error is None
    finally:
        inf.stop()


def test_the_backoff_starts_small_again_after_a_success(fake_kube, api):
    # Watches that fail (after the client's own retries) back the informer off, more each time...
    fake_kube.faults.inject("watch", "configmaps", status=500, times=3 * DEFAULT_RETRY.tries)
    inf = Informer(api, "ConfigMap", "app=informed", lambda: None, watch_seconds=1).start()
    try:
        inf.wait_synced("watch the test's ConfigMaps")
        wait_until(lambda: inf.backoff.current > BACKOFF_FIRST * 4, 30, message="the informer to back off")
        # ...until a watch works again: the next failure waits the shortest time again.
        fake_kube.create("ConfigMap", "default", configmap("back"))
        wait_seen(inf, "back", 20)
        assert inf.backoff.current == BACKOFF_FIRST
        assert inf.error is None or inf.synced.is_set()
    finally:
        inf.stop()


def test_a_watch_from_a_compacted_version_relists_and_misses_nothing(fake_kube, api):
    inf = Informer(api, "ConfigMap", "app=informed", lambda: None, watch_seconds=1).start()
    try:
        inf.wait_synced("watch the test's ConfigMaps")
        fake_kube.create("ConfigMap", "default", configmap("seen"))
        wait_seen(inf, "seen", 5)
        relists = inf.relists
        # The informer's next watch is held at the server while things change and the
        # history is compacted: it asks from a version that is gone (410), and only a
        # fresh list brings what happened meanwhile.
        rule = fake_kube.faults.inject("watch", "configmaps", delay=1.5, times=1)
        wait_until(lambda: rule.fired, 10, interval=0.02, message="the informer to watch again")
        fake_kube.create("ConfigMap", "default", configmap("after-compaction"))
        fake_kube.delete("ConfigMap", "default", "seen")
        fake_kube.compact()
        wait_until(
            lambda: inf.get("seen") is None and inf.get("after-compaction") is not None,
            10,
            interval=0.02,
            message="the relist to bring the create and the delete",
        )
        assert inf.expired == 1 and inf.relists == relists + 1
    finally:
        inf.stop()

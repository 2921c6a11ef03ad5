"""The informer against the fake API server: 410 Gone and ERROR events relist at once,
and its backoff starts small again after a success."""

from __future__ import annotations

import time

import pytest

from launcher.backends.kubernetes.informer import Informer
from launcher.backends.kubernetes.kubeapi import KubeApi
from launcher.backends.kubernetes.profiles import load_profile
from launcher.config import load_config


@pytest.fixture
def api(fake_kube):
    a = KubeApi(load_profile(load_config().profile("fake")))
    yield a
    a.close()


def configmap(name: str) -> dict:
    return {"metadata": {"name": name, "labels": {"app": "informed"}}, "data": {}}


def seen_within(inf: Informer, name: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if inf.get(name) is not None:
            return True
        time.sleep(0.02)
    return False


def test_watches_answered_410_gone_relist_at_once(fake_kube, api):
    inf = Informer(api, "ConfigMap", "app=informed", lambda: None, watch_seconds=1).start()
    try:
        inf.wait_synced("watch the test's ConfigMaps")
        lists = fake_kube.count(verb="list", kind="ConfigMap")
        armed = time.monotonic()
        fake_kube.faults.gone_watches = 6
        # The open watch ends within 1 s; then six 410s, each followed by a list and a new
        # watch at once. Treated as failures
        # with backoff (0.2 s doubling), they would take over 10 s.
        while fake_kube.faults.gone_watches and time.monotonic() - armed < 5.0:
            time.sleep(0.02)
        assert fake_kube.faults.gone_watches == 0, f"{fake_kube.faults.gone_watches} 410s left after 5 s"
        fake_kube.create("ConfigMap", "default", configmap("after-gone"))
        assert seen_within(inf, "after-gone", 2.0)
        assert fake_kube.count(verb="list", kind="ConfigMap") - lists >= 6  # a fresh list after each
        assert inf.error is None
    finally:
        inf.stop()

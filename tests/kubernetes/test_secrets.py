"""Secrets stored as Kubernetes Secrets, through the real client and the fake API server."""

from __future__ import annotations

import base64
import json

import pytest

from launcher.backends.kubernetes.secrets import KubernetesSecretStore
from launcher.config import load_config
from launcher.errors import InputError, NotFoundError
from launcher.sdk.profiles import open_secret_store
from launcher.secrets.kinds import Secret, SecretKind


@pytest.fixture
def store(fake_kube):
    return open_secret_store(load_config().profile("fake"))


def test_create_list_get_delete(store, fake_kube):
    assert isinstance(store, KubernetesSecretStore)
    store.create(Secret("hf", SecretKind.HF, {"token": "hf_abcdefgh"}))
    store.create(Secret("creds", SecretKind.FILE, {"value": "line1\nline2"}, {"mount_path": "/etc/creds"}))
    assert [s.name for s in store.list()] == ["creds", "hf"]
    got = store.get("creds")
    assert got.kind is SecretKind.FILE and got.data == {"value": "line1\nline2"}
    assert got.options == {"mount_path": "/etc/creds"} and got.created_at is not None
    raw = fake_kube.get("Secret", "default", "hf")
    assert raw["metadata"]["labels"]["launcher.dev/secret-kind"] == "hf"
    assert "hf_abcdefgh" not in json.dumps(raw["metadata"])
    store.delete("hf")
    assert [s.name for s in store.list()] == ["creds"]
    with pytest.raises(NotFoundError, match="no secret named 'hf' in namespace default of cluster fake"):
        store.delete("hf")


def test_docker_registry_secret_is_usable_as_image_pull_secret(store, fake_kube):
    store.create(
        Secret("reg", SecretKind.DOCKER_REGISTRY, {"username": "bot", "password": "pw-12345678", "server": "ghcr.io"})
    )
    raw = fake_kube.get("Secret", "default", "reg")
    assert raw["type"] == "kubernetes.io/dockerconfigjson"
    cfg = json.loads(base64.b64decode(raw["data"][".dockerconfigjson"]))
    assert cfg["auths"]["ghcr.io"]["auth"] == base64.b64encode(b"bot:pw-12345678").decode()
    assert store.get("reg").data == {"username": "bot", "password": "pw-12345678", "server": "ghcr.io"}


def test_replace_and_conflicts(store, fake_kube):
    store.create(Secret("tok", SecretKind.ENV, {"value": "first-value"}, {"env_key": "TOK"}))
    with pytest.raises(InputError, match="already exists"):
        store.create(Secret("tok", SecretKind.ENV, {"value": "second-value"}, {"env_key": "TOK"}))
    store.create(Secret("tok", SecretKind.ENV, {"value": "second-value"}, {"env_key": "TOK"}), replace=True)
    assert store.get("tok").data["value"] == "second-value"
    fake_kube.create("Secret", "default", {"metadata": {"name": "theirs"}, "data": {"a": "Yg=="}})
    with pytest.raises(InputError, match="was not created by the launcher"):
        store.create(Secret("theirs", SecretKind.ENV, {"value": "x"}, {"env_key": "X"}), replace=True)
    assert "theirs" not in [s.name for s in store.list()]
    with pytest.raises(NotFoundError):
        store.delete("theirs")
    with pytest.raises(InputError, match="secrets: no secret named 'nope'"):
        store.for_run(["nope"])

from __future__ import annotations

import pytest

from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.config import load_config


def _image_mode(launcher_home) -> None:
    """The fake's unmapped images run the host's Python, which has the launcher: the
    `image` entrypoint mode. (Inject mode, with the runtime and a user's image mapped to
    directories, is what test_jobset.py runs.)"""
    import yaml

    path = launcher_home / "config.yaml"
    config = yaml.safe_load(path.read_text())
    for settings in (config.get("clusters") or {}).values():
        settings.setdefault("entrypoint_mode", "image")
    path.write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.fixture
def fake_kube(fake_kube, launcher_home):
    _image_mode(launcher_home)
    return fake_kube


@pytest.fixture
def fake_kube_factory(fake_kube_factory, launcher_home):
    def make(**options):
        kube = fake_kube_factory(**options)
        _image_mode(launcher_home)
        return kube
    return make


@pytest.fixture
def backend(fake_kube):
    b = KubernetesBackend(load_config().profile("fake"))
    try:
        yield b
    finally:
        b.close()


def make_backend(name: str = "fake") -> KubernetesBackend:
    return KubernetesBackend(load_config().profile(name))

from __future__ import annotations

import pytest

from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.config import load_config


@pytest.fixture
def backend(fake_kube):
    b = KubernetesBackend(load_config().profile("fake"))
    try:
        yield b
    finally:
        b.close()


def make_backend(name: str = "fake") -> KubernetesBackend:
    return KubernetesBackend(load_config().profile(name))

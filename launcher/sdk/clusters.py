"""Cluster profiles: where runs can go (`launcher cluster add` writes them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Cluster", "get_clusters"]


@dataclass(frozen=True)
class Cluster:
    name: str
    backend: str
    """local or kubernetes"""
    current: bool
    """The profile runs go to by default (`launcher cluster use`)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The profile's settings in config.yaml (context, namespace, queue, ...)."""


def get_clusters() -> list[Cluster]:
    """Every cluster profile, `local` first. Reads config.yaml; contacts no cluster."""
    from launcher.config import load_config

    config = load_config()
    return [Cluster(p.name, p.backend, p.name == config.current, dict(p.settings)) for p in config.profiles()]

"""Which profile a command means (--cluster, --backend, the current one), and its secrets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from launcher.backends.registry import open_backend
from launcher.config import Config, Profile, load_config
from launcher.errors import InputError

if TYPE_CHECKING:
    from launcher.secrets.store import SecretStore


def open_secret_store(profile: Profile) -> SecretStore:
    """Where runs of this profile find their secrets."""
    return open_backend(profile).secret_store()


def resolve_profile(cluster: str | None = None, backend: str | None = None, *, config: Config | None = None) -> Profile:
    """--cluster names a profile; --backend picks the first profile of that backend
    (the current one if it matches). `config`: the one the command already read."""
    config = config or load_config()
    if cluster:
        profile = config.profile(cluster)
        if backend and profile.backend != backend:
            raise InputError(f"cluster {cluster!r} uses the {profile.backend} backend, not {backend}")
        return profile
    current = config.profile()
    if backend is None or current.backend == backend:
        return current
    for p in config.profiles():
        if p.backend == backend:
            return p
    raise InputError(f"no cluster profile uses the {backend} backend", hint="add one with `launcher cluster add`")

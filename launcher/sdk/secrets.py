"""Secrets: stored where a cluster profile's runs find them (this machine, or the cluster),
and given to runs as environment variables or files. Nothing here returns a value."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from launcher.errors import InputError, NotFoundError

__all__ = ["SecretInfo", "create_secret", "delete_secrets", "get_secrets"]


@dataclass(frozen=True)
class SecretInfo:
    """A stored secret, without its values."""

    name: str
    kind: str
    exposed_as: list[str] = field(default_factory=list)
    """The env variables and files a run sees it as."""
    created_at: datetime | None = None
    options: dict[str, str] = field(default_factory=dict)
    """env_key, mount_path where set."""
    too_short_to_mask: list[str] = field(default_factory=list)
    """Its keys whose values are too short to be masked in logs."""


def _store(cluster: str | None):
    from launcher.backends.registry import open_secret_store, resolve_profile

    return open_secret_store(resolve_profile(cluster=cluster))


def _info(secret) -> SecretInfo:
    from launcher.secrets.kinds import exposed

    return SecretInfo(secret.name, secret.kind.value, exposed(secret), secret.created_at, dict(secret.options),
                      secret.too_short_keys())


def create_secret(kind: str, name: str, data: dict[str, str] | str, *, cluster: str | None = None,
                  options: dict[str, str] | None = None, replace: bool = False) -> SecretInfo:
    """Store a secret of `kind` (env, file, ssh, git-ssh, s3, gcp, databricks, hf,
    docker-registry) in the cluster profile's store. `data`: its values by key (a str is
    {"value": data}: env and file). `options`: env_key for env (default: the name in
    upper case), mount_path for file and ssh. What no run could use is an InputError."""
    from launcher.secrets.kinds import Secret, SecretKind, check_mount_path, check_name, check_new

    problem = check_name(name)
    if problem:
        raise InputError(problem)
    try:
        secret_kind = SecretKind(kind)
    except ValueError:
        kinds = ", ".join(k.value for k in SecretKind)
        raise InputError(f"{kind!r} is not a kind of secret; use one of {kinds}") from None
    values = {"value": data} if isinstance(data, str) else dict(data)
    opts = dict(options or {})
    if secret_kind is SecretKind.ENV:
        opts.setdefault("env_key", name.upper().replace("-", "_"))
    if "mount_path" in opts:
        problem = check_mount_path(opts["mount_path"])
        if problem:
            raise InputError(f"mount_path: {problem}")
    secret = Secret(name=name, kind=secret_kind, data=values, options=opts)
    problem = check_new(secret)  # what no run could use is refused here, not in every run after
    if problem:
        raise InputError(f"secret {name!r}: {problem}")
    _store(cluster).create(secret, replace=replace)
    return _info(secret)


def get_secrets(*, cluster: str | None = None) -> list[SecretInfo]:
    """The secrets of the cluster profile's store (default: the current profile's)."""
    return [_info(s) for s in _store(cluster).list()]


def delete_secrets(names: str | Iterable[str], *, cluster: str | None = None) -> list[str]:
    """Delete secrets by name; one that does not exist is a NotFoundError before any is deleted."""
    names = [names] if isinstance(names, str) else list(names)
    store = _store(cluster)
    known = store.names()  # not list(): a record no run can use must still be deletable
    for n in names:
        if n not in known:
            raise NotFoundError(f"no secret named {n!r} in {store.where}")
    for n in names:
        store.delete(n)
    return names

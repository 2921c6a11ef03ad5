"""Secrets: stored where a cluster profile's runs find them (this machine, or the cluster),
and given to runs as environment variables or files. Nothing here returns a value."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from launcher.errors import InputError, NotFoundError

__all__ = [
    "SecretInfo",
    "SecretList",
    "create_secret",
    "delete_secrets",
    "get_secret_names",
    "get_secrets",
    "save_secret",
]


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
    where: str = ""
    """The store that holds it, in words."""


def _store(cluster: str | None):
    from launcher.sdk.profiles import open_secret_store, resolve_profile

    return open_secret_store(resolve_profile(cluster=cluster))


class SecretList(list):
    """A list of what a store holds, with `where`: the store, in words."""

    where: str = ""


def _info(secret, where: str) -> SecretInfo:
    from launcher.secrets.kinds import exposed

    return SecretInfo(
        secret.name,
        secret.kind.value,
        exposed(secret),
        secret.created_at,
        dict(secret.options),
        secret.too_short_keys(),
        where,
    )


def save_secret(secret, *, cluster: str | None = None, replace: bool = False) -> SecretInfo:
    """Store a built Secret (launcher.secrets.shapes makes each kind) in the cluster
    profile's store, after the checks of what no run could use (an InputError)."""
    from launcher.secrets.shapes import checked

    store = _store(cluster)
    store.create(checked(secret), replace=replace)
    return _info(secret, store.where)


def bundle_secrets(
    run: str, names: Iterable[str] | None = None, *, cluster: str | None = None
) -> tuple[str, list[str]]:
    """Create (or replace) run `run`'s own Secret from the named secrets of the cluster
    profile's store (None: all of them, as a spec without `secrets:`), which the manifests
    of an offline `run --dry-run` reference. Returns the store, in words, and the names of
    the secrets it could not carry (docker-registry ones). Never reads out a value."""
    store = _store(cluster)
    left_out = store.create_run_secret(run, None if names is None else list(names))
    return store.where, left_out


def create_secret(
    kind: str,
    name: str,
    data: dict[str, str] | str,
    *,
    cluster: str | None = None,
    options: dict[str, str] | None = None,
    replace: bool = False,
) -> SecretInfo:
    """Store a secret of `kind` (env, file, ssh, git-ssh, s3, gcp, databricks, hf,
    docker-registry, ...; mcli's names too) in the cluster profile's store. `data`: its
    values by key (a str is {"value": data}: env and file). `options`: env_key for env
    (default: the name in upper case), mount_path for file and ssh. What no run could use
    is an InputError."""
    from launcher.secrets.kinds import Secret, SecretKind, kind_named

    secret_kind = kind_named(kind)
    if secret_kind is None:
        kinds = ", ".join(k.value for k in SecretKind)
        raise InputError(f"{kind!r} is not a kind of secret; use one of {kinds}")
    values = {"value": data} if isinstance(data, str) else dict(data)
    opts = dict(options or {})
    if secret_kind is SecretKind.ENV:
        opts.setdefault("env_key", name.upper().replace("-", "_"))
    return save_secret(Secret(name=name, kind=secret_kind, data=values, options=opts), cluster=cluster, replace=replace)


def get_secrets(*, cluster: str | None = None, kinds: Iterable[str] = ()) -> SecretList:
    """The secrets of the cluster profile's store (default: the current profile's), of
    these kinds only where given (our names or mcli's)."""
    from launcher.secrets.shapes import kinds_named

    wanted = kinds_named(tuple(kinds))  # a misspelt kind fails before the store is read
    store = _store(cluster)
    out = SecretList(_info(s, store.where) for s in store.list() if not wanted or s.kind in wanted)
    out.where = store.where
    return out


def get_secret_names(*, cluster: str | None = None) -> SecretList:
    """The names in the store, even of a record no run can use (so that it can be deleted)."""
    store = _store(cluster)
    out = SecretList(store.names())
    out.where = store.where
    return out


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

"""mcli's secret and cluster functions (mosaicml-cli 0.8.3 signatures), on the launcher's SDK:
a secret goes to the current cluster profile's store, as `launcher secret create` puts it;
a cluster is a cluster profile."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from launcher.mcli.calls import call
from launcher.mcli.clusters import ClusterDetails, ClusterUtilization, from_profile, utilization_of
from launcher.mcli.exceptions import MAPIException
from launcher.mcli.secrets import KIND_OF_TYPE, Secret, SecretType, from_info

__all__ = ["create_secret", "delete_secrets", "get_cluster", "get_clusters", "get_secrets"]


def create_secret(secret: Secret, *, timeout: float | None = 10, future: bool = False) -> Any:
    """Store an mcli secret (MCLIEnvVarSecret, MCLIMountedSecret, MCLIS3Secret, ...) in the
    current cluster profile's store; every run gets it from then on. Returns it without its
    values. What no run could use (a missing value, a bad name or mount path) is a
    MAPIException, status 400, that never quotes a value."""
    if not isinstance(secret, Secret):
        raise TypeError(f"create_secret takes one of mcli's Secret objects, not {type(secret).__name__}")

    def create() -> Secret:
        from launcher.sdk.secrets import save_secret

        return from_info(save_secret(secret.launcher_secret()))

    return call(create, timeout=timeout, future=future)


def _secret_names(secrets: Any) -> list[str] | None:
    if secrets is None:
        return None
    items = [secrets] if isinstance(secrets, str | Secret) else list(secrets)
    return [s.name if isinstance(s, Secret) else str(s) for s in items]


def get_secrets(
    secrets: list[str] | list[Secret] | None = None,
    *,
    secret_types: list[str] | list[SecretType] | None = None,
    timeout: float | None = 10,
    future: bool = False,
) -> Any:
    """The stored secrets, without their values (mcli.get_secrets): those named in `secrets`
    and of `secret_types` where given."""
    names = _secret_names(secrets)
    kinds = None if secret_types is None else [KIND_OF_TYPE[SecretType.ensure_enum(t)] for t in secret_types]

    def listed() -> list[Secret]:
        from launcher.sdk.secrets import get_secrets as sdk_get_secrets

        found = [from_info(i) for i in sdk_get_secrets(kinds=kinds or ())]
        return [s for s in found if names is None or s.name in names]

    return call(listed, timeout=timeout, future=future)


def delete_secrets(
    secrets: list[str] | list[Secret] | None = None, *, timeout: float | None = 10, future: bool = False
) -> Any:
    """Delete secrets (mcli.delete_secrets): those named, or every one where `secrets` is None.
    Returns them as they were; a name that is not stored is a MAPIException, status 404,
    before any is deleted."""
    names = _secret_names(secrets)

    def delete() -> list[Secret]:
        from launcher.sdk.secrets import delete_secrets as sdk_delete_secrets
        from launcher.sdk.secrets import get_secrets as sdk_get_secrets

        stored = {i.name: from_info(i) for i in sdk_get_secrets()}
        wanted = list(stored) if names is None else names
        if not wanted:
            return []
        sdk_delete_secrets(wanted)
        return [stored[n] for n in wanted if n in stored]

    return call(delete, timeout=timeout, future=future)


def get_clusters(
    clusters: list[str] | list[ClusterDetails] | None = None,
    *,
    include_utilization: bool = False,
    include_all: bool = False,
    timeout: float | None = 10,
    future: bool = False,
    submission_type_filter: str | None = None,
) -> Any:
    """The cluster profiles runs can go to (mcli.get_clusters), those named in `clusters`
    where given; `submission_type_filter` TRAINING or INTERACTIVE (both take either).
    With `include_utilization`, each one's GPUs by type and its active and queued runs, as
    `launcher util` reports them (None for a profile that cannot be asked)."""
    names = None if clusters is None else [c.name if isinstance(c, ClusterDetails) else str(c) for c in clusters]
    return call(
        lambda: _clusters(names, submission_type_filter, utilization=include_utilization),
        timeout=timeout,
        future=future,
    )


def _clusters(
    names: list[str] | None, submission_type: str | None = None, *, utilization: bool = False
) -> list[ClusterDetails]:
    from launcher.sdk.clusters import get_clusters as sdk_get_clusters

    profiles = sdk_get_clusters()
    if names is not None:
        known = {c.name for c in profiles}
        missing = [n for n in names if n not in known]
        if missing:
            raise MAPIException(
                HTTPStatus.NOT_FOUND,
                f"no cluster profile named {', '.join(missing)} (profiles: {', '.join(sorted(known))})",
                "`launcher cluster add` makes one",
            )
        profiles = [c for c in profiles if c.name in names]
    usage = _utilization([c.name for c in profiles]) if utilization else {}
    found = [from_profile(c, usage.get(c.name)) for c in profiles]
    if submission_type is not None:
        found = [c for c in found if str(submission_type).upper() in c.submission_types]
    return found


def _utilization(names: list[str]) -> dict[str, ClusterUtilization]:
    """Each profile's utilization, as `launcher util` asks for it; a profile that cannot be
    asked (away, or a backend that cannot count its GPUs) has none."""
    from launcher.backends.capabilities import Feature
    from launcher.config import load_config
    from launcher.sdk.fanout import ask_some
    from launcher.sdk.runs import get_runs as sdk_get_runs

    config = load_config()

    def usage(backend: Any) -> Any:
        try:
            backend.require(Feature.GPU_USAGE)
            return backend.gpu_usage()
        finally:
            backend.close()

    from launcher.errors import LauncherError

    try:
        answers, _ = ask_some([config.profile(n) for n in names], usage, "asked")
    except LauncherError:  # not one could be asked: none has a utilization
        return {}
    out = {}
    for name, gpus in answers.items():
        runs = [r for r in sdk_get_runs(cluster=name) if not r.status.is_terminal]
        out[name] = utilization_of(gpus, runs)
    return out


def get_cluster(
    cluster: str,
    *,
    include_utilization: bool = True,
    include_all: bool = False,
    timeout: float | None = 10,
    future: bool = False,
) -> Any:
    """One cluster profile (mcli.get_cluster); one that is not there is a MAPIException, status 404."""
    name = cluster.name if isinstance(cluster, ClusterDetails) else cluster

    return call(lambda: _clusters([name], utilization=include_utilization)[0], timeout=timeout, future=future)

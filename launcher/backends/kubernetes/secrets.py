"""Secrets kept as Kubernetes Secrets in the profile's namespace.

Each launcher secret is one Secret named like it, labelled
launcher.dev/secret-kind=<kind>, with its non-secret options in an annotation.
A docker-registry secret is of type kubernetes.io/dockerconfigjson, so pods can
name it in imagePullSecrets. Runs reference these Secrets by name; the values
stay in the cluster.
"""

from __future__ import annotations

import base64
import builtins
import json
from typing import TYPE_CHECKING

from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.kubeapi import KubeApi, KubeError, retry_on_conflict
from launcher.backends.kubernetes.profiles import ClusterProfile, load_profile
from launcher.errors import InputError, NotFoundError
from launcher.pod import contract
from launcher.secrets.kinds import Secret, SecretKind, project
from launcher.secrets.store import SecretStore

if TYPE_CHECKING:
    from launcher.config import Profile

DOCKER_CONFIG = ".dockerconfigjson"
DOCKER_HUB = "https://index.docker.io/v1/"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def docker_config(data: dict[str, str]) -> str | None:
    """The .dockerconfigjson of a docker-registry secret (username, password, server, email)."""
    if not data.get("username") or not data.get("password"):
        return None
    entry = {
        "username": data["username"],
        "password": data["password"],
        "auth": _b64(f"{data['username']}:{data['password']}"),
    }
    if data.get("email"):
        entry["email"] = data["email"]
    return json.dumps({"auths": {data.get("server") or DOCKER_HUB: entry}})


def to_manifest(secret: Secret, namespace: str) -> dict:
    data = dict(secret.data)
    kind_type = "Opaque"
    if secret.kind is SecretKind.DOCKER_REGISTRY:
        cfg = docker_config(data)
        if cfg:
            data[DOCKER_CONFIG] = cfg
            kind_type = "kubernetes.io/dockerconfigjson"
    for key in data:
        if not key or not all(c.isalnum() or c in "-._" for c in key):
            raise InputError(f"secret {secret.name}: key {key!r} cannot be a Kubernetes Secret key")
    meta: dict = {
        "name": secret.name,
        "namespace": namespace,
        "labels": {keys.MANAGED_BY: keys.MANAGER, keys.SECRET_KIND: secret.kind.value},
        "annotations": {keys.SECRET_OPTIONS: json.dumps(secret.options, sort_keys=True)},
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": kind_type,
        "data": {k: _b64(v) for k, v in data.items()},
    }


def from_manifest(obj: dict) -> Secret | None:
    from launcher.backends.kubernetes.attempts import ts
    from launcher.secrets.kinds import SecretKind as Kind

    meta = obj.get("metadata") or {}
    try:
        kind = Kind((meta.get("labels") or {}).get(keys.SECRET_KIND, ""))
    except ValueError:
        return None
    try:
        options = json.loads((meta.get("annotations") or {}).get(keys.SECRET_OPTIONS) or "{}")
    except ValueError:
        options = {}
    data = {
        k: base64.b64decode(v).decode("utf-8", errors="replace")
        for k, v in (obj.get("data") or {}).items()
        if k != DOCKER_CONFIG
    }
    return Secret(
        name=meta["name"], kind=kind, data=data, options=options, created_at=ts(meta.get("creationTimestamp"))
    )


def run_secret_manifest(run: str, secrets: list[Secret], namespace: str) -> tuple[dict, list[str]]:
    """Run `run`'s own Secret: every env variable its secrets give (the values, and the
    variables that name their files), each file as the key `<secret>.<file>` of the volume
    mounted at keys.RUN_SECRET_MOUNT, and the entrypoint's mask lists; plus the names of the
    docker-registry secrets, which no Secret volume or variable can carry."""
    data: dict[str, str] = {}
    mask_env: list[str] = []
    mask_files: list[str] = []
    left_out: list[str] = []
    for s in sorted(secrets, key=lambda s: s.name):
        p = project(s)
        if p.image_pull:
            left_out.append(s.name)
        for var, key in p.env.items():
            data[var] = s.data[key]
            mask_env.append(var)
        for fname, key in sorted(p.files.items()):
            data[f"{s.name}.{fname}"] = s.data[key]
            mask_files.append(f"{keys.RUN_SECRET_MOUNT}/{s.name}.{fname}")
        for var, value in p.plain_env.items():
            # Every path a kind gives is "{mount}/<file>": here, the flat key of that file.
            data[var] = value.replace("{mount}/", f"{keys.RUN_SECRET_MOUNT}/{s.name}.")
    data[contract.MASK_ENV] = ",".join(mask_env)
    data[contract.MASK_FILES] = ":".join(mask_files)
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": keys.run_secret_name(run),
            "namespace": namespace,
            "labels": {keys.MANAGED_BY: keys.MANAGER, keys.SECRETS_OF: run},
        },
        "type": "Opaque",
        "data": {k: _b64(v) for k, v in data.items()},
    }
    return body, left_out


class KubernetesSecretStore(SecretStore):
    def __init__(self, profile: Profile | ClusterProfile, *, api: KubeApi | None = None):
        self.profile = profile if isinstance(profile, ClusterProfile) else load_profile(profile)
        self.where = self.profile.where
        self._api = api

    @property
    def api(self) -> KubeApi:
        if self._api is None:
            self._api = KubeApi(self.profile)
        return self._api

    def list(self) -> list[Secret]:
        items, _ = self.api.list("Secret", labels=keys.SECRET_KIND)
        out = [s for s in (from_manifest(o) for o in items) if s is not None]
        return sorted(out, key=lambda s: s.name)

    def create(self, secret: Secret, *, replace: bool = False) -> None:
        body = to_manifest(secret, self.profile.namespace)
        existing = retry_on_conflict(lambda: self._create_or_existing(body))
        if existing is None:
            return
        if keys.SECRET_KIND not in ((existing.get("metadata") or {}).get("labels") or {}):
            raise InputError(
                f"a Secret named {secret.name!r} already exists in {self.where} "
                "and was not created by the launcher; pick another name"
            )
        if not replace:
            raise InputError(
                f"a secret named {secret.name!r} already exists in {self.where}",
                hint="delete it first, or pass --replace",
            )
        body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        self.api.replace("Secret", secret.name, body)

    def _create_or_existing(self, body: dict) -> dict | None:
        """Create the Secret (None), or the one that already exists by its name. One that
        is deleted between the two answers the conflict again, for the next try."""
        try:
            self.api.create("Secret", body)
            return None
        except KubeError as e:
            if e.status != 409:
                raise
            existing = self.api.get("Secret", body["metadata"]["name"])
            if existing is None:
                raise
            return existing

    def create_run_secret(self, run: str, names: builtins.list[str] | None) -> builtins.list[str]:
        """The Secret <run>-secrets that the pods of an offline dry-run take the run's secrets
        from (run_secret_manifest), replacing one made before; the docker-registry secrets'
        names, which it cannot carry (pods name those in imagePullSecrets)."""
        body, left_out = run_secret_manifest(run, self.for_run(names), self.profile.namespace)
        name = body["metadata"]["name"]
        existing = retry_on_conflict(lambda: self._create_or_existing(body))
        if existing is not None:
            if ((existing.get("metadata") or {}).get("labels") or {}).get(keys.SECRETS_OF) != run:
                raise InputError(
                    f"a Secret named {name!r} already exists in {self.where} and is not run {run}'s own; "
                    "the run's pods would read it"
                )
            body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
            self.api.replace("Secret", name, body)
        return left_out

    def delete(self, name: str) -> None:
        existing = self.api.get("Secret", name)
        if existing is None or keys.SECRET_KIND not in ((existing.get("metadata") or {}).get("labels") or {}):
            raise NotFoundError(f"no secret named {name!r} in {self.where}")
        self.api.delete("Secret", name, uid=existing["metadata"]["uid"])

"""Storage credentials for commands run on a developer's machine (`launcher data convert
--out dbfs:/Volumes/...`, `launcher data prepare`): the environment, and where it lacks
Databricks credentials, the launcher's local secret store (a `databricks` secret: the one
named `databricks`, else the only one). Code that runs inside a run never reads the local
store: its credentials come with the run, from its secrets."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from launcher.storage import Credentials, scheme_of
from launcher.storage.databricks import other_auth

LOCAL_SECRET = "`launcher secret create databricks --host https://<workspace>...` on this machine"


def _stored_databricks_secret() -> Any:
    from launcher.config import launcher_home
    from launcher.secrets.kinds import SecretKind
    from launcher.secrets.store import LocalSecretStore

    found = [s for s in LocalSecretStore(launcher_home()).list() if s.kind is SecretKind.DATABRICKS]
    named = [s for s in found if s.name == "databricks"]
    if named:
        return named[0]
    return found[0] if len(found) == 1 else None


def local_credentials(url: str, env: Mapping[str, str] | None = None) -> Credentials:
    """The credentials for `url`: the environment, with a dbfs:/ URL's missing host or token
    taken from the local secret store (which is read only then)."""
    env = os.environ if env is None else env
    if scheme_of(url) != "dbfs":
        return Credentials(env)
    host = env.get("DATABRICKS_HOST", "").strip()
    token = env.get("DATABRICKS_TOKEN", "").strip()
    if not (host and (token or other_auth(env))):
        stored = _stored_databricks_secret()
        if stored is not None:
            env = {
                **env,
                "DATABRICKS_HOST": host or stored.data.get("host", "").strip(),
                "DATABRICKS_TOKEN": token or stored.data.get("token", "").strip(),
            }
    return Credentials(env, other_ways=(LOCAL_SECRET,))

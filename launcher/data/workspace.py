"""The one Databricks WorkspaceClient builder, for every reader and writer of dbfs:/Volumes
(data convert/prepare, the trainers' pre-flight checks, the HF recipe's data and checkpoints).

Two credential sources, in order:
1. the environment: DATABRICKS_HOST with DATABRICKS_TOKEN, or with another auth the SDK reads
   from the environment (DATABRICKS_CLIENT_ID/SECRET, DATABRICKS_CONFIG_PROFILE). A run gets
   these from its databricks secret.
2. the launcher's local secret store (a `databricks` secret), for commands run on a
   developer's machine (`launcher data convert --out dbfs:/Volumes/...`).

The SDK retries connection errors for 300 s by default; a dead host or a firewall must fail
in seconds instead. 401/403/404 are never retried, so a bad token fails at once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from launcher.errors import InputError

RETRY_TIMEOUT_SECONDS = 20
HTTP_TIMEOUT_SECONDS = 60
NEEDS = "add a databricks secret to the run (it provides DATABRICKS_HOST and DATABRICKS_TOKEN)"


def _other_auth(env: Mapping[str, str]) -> bool:
    return bool((env.get("DATABRICKS_CLIENT_ID") and env.get("DATABRICKS_CLIENT_SECRET")) or env.get("DATABRICKS_CONFIG_PROFILE"))


def _stored_databricks_secret() -> Any:
    """The local store's databricks secret: the one named `databricks`, else the only one."""
    from launcher.config import launcher_home
    from launcher.secrets.kinds import SecretKind
    from launcher.secrets.store import LocalSecretStore

    found = [s for s in LocalSecretStore(launcher_home()).list() if s.kind is SecretKind.DATABRICKS]
    named = [s for s in found if s.name == "databricks"]
    if named:
        return named[0]
    return found[0] if len(found) == 1 else None


def credentials(what: str, env: Mapping[str, str] | None = None, *, secret_store: bool = True) -> dict[str, str]:
    """Config keyword arguments for the SDK: host and token, or host alone when the
    environment carries another auth. Raises InputError naming `what` and the fix."""
    env = os.environ if env is None else env
    host = env.get("DATABRICKS_HOST", "").strip()
    token = env.get("DATABRICKS_TOKEN", "").strip()
    if host and not token and _other_auth(env):
        return {"host": host}
    if not (host and token) and secret_store:
        stored = _stored_databricks_secret()
        if stored is not None:
            host = host or stored.data.get("host", "").strip()
            token = token or stored.data.get("token", "").strip()
    missing = [n for n, v in (("DATABRICKS_HOST", host), ("DATABRICKS_TOKEN", token)) if not v]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        fix = NEEDS
        if secret_store:
            fix += ", or `launcher secret create databricks --host https://<workspace>...` on this machine"
        raise InputError(f"{what} needs Databricks credentials, but {' and '.join(missing)} {verb} not set: {fix}")
    return {"host": host, "token": token, "auth_type": "pat"}


def workspace_client(
    what: str,
    env: Mapping[str, str] | None = None,
    *,
    secret_store: bool = True,
    retry_timeout_seconds: int = RETRY_TIMEOUT_SECONDS,
    http_timeout_seconds: int = HTTP_TIMEOUT_SECONDS,
) -> Any:
    """A WorkspaceClient with a short retry window. `what` (e.g. the dataset's URI) starts
    every message about missing or unusable credentials."""
    try:
        from databricks.sdk import WorkspaceClient
        from databricks.sdk.config import Config
    except ImportError:
        raise InputError(f"{what} needs databricks-sdk: pip install databricks-sdk") from None
    kwargs = credentials(what, env, secret_store=secret_store)
    try:
        config = Config(
            **kwargs,
            retry_timeout_seconds=retry_timeout_seconds,
            http_timeout_seconds=http_timeout_seconds,
        )
    except ValueError as e:  # the SDK could not configure auth
        first = (str(e).strip() or type(e).__name__).splitlines()[0][:300]
        raise InputError(f"{what}: Databricks credentials are not usable: {first}") from None
    return WorkspaceClient(config=config)

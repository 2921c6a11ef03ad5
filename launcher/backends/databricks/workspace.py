"""The workspace as this backend uses it, through databricks-sdk's WorkspaceClient (imported
when first needed): the client of a profile, and a run's record, record.json in the run's
workspace folder beside its driver and plan. The record is the run's durable state, as a
Kubernetes run's ConfigMap is: its submitted spec (secret-free), its attempts' run ids, its
scope and the warnings submit gave. Every call goes through errors.calls()."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.backends.databricks.errors import calls
from launcher.backends.databricks.render import RECORD_FILE, run_folder
from launcher.errors import NotFoundError, RunNotFound

if TYPE_CHECKING:
    from databricks.sdk import WorkspaceClient

    from launcher.backends.databricks.profile import DatabricksProfile


def open_client(profile: DatabricksProfile, home: Path) -> WorkspaceClient:
    """The profile's client: its host, ~/.databrickscfg profile or `databricks` secret, else
    whatever databricks-sdk resolves from the environment."""
    from databricks.sdk import WorkspaceClient
    from databricks.sdk.config import Config

    kwargs: dict[str, Any] = {"retry_timeout_seconds": max(1, int(profile.request_timeout))}
    if profile.host:
        kwargs["host"] = profile.host
    if profile.config_profile:
        kwargs["profile"] = profile.config_profile
    if profile.credentials_secret:
        from launcher.secrets.store import LocalSecretStore

        secret = LocalSecretStore(home).get(profile.credentials_secret)
        kwargs.setdefault("host", secret.data.get("host"))
        kwargs["token"] = secret.data.get("token")
        kwargs["auth_type"] = "pat"
    with calls(profile.where, "configuring the client", configuring=True):
        return WorkspaceClient(config=Config(**kwargs))


def put_file(w: WorkspaceClient, profile: DatabricksProfile, path: str, data: bytes) -> None:
    from databricks.sdk.service.workspace import ImportFormat

    with calls(profile.where, f"uploading {path}"):
        w.workspace.import_(path, content=base64.b64encode(data).decode(), format=ImportFormat.RAW, overwrite=True)


def mkdirs(w: WorkspaceClient, profile: DatabricksProfile, path: str) -> None:
    with calls(profile.where, f"creating the folder {path}"):
        w.workspace.mkdirs(path)


def read_record(w: WorkspaceClient, profile: DatabricksProfile, name: str) -> dict[str, Any]:
    from databricks.sdk import errors
    from databricks.sdk.service.workspace import ExportFormat

    path = f"{run_folder(profile, name)}/{RECORD_FILE}"
    try:
        with calls(profile.where, f"reading the record of run {name}"):
            try:
                exported = w.workspace.export(path, format=ExportFormat.AUTO)
            except errors.DatabricksError as e:
                if getattr(e, "error_code", None) in ("RESOURCE_DOES_NOT_EXIST", "NOT_FOUND"):
                    raise NotFoundError(path) from None
                raise
    except NotFoundError:
        raise RunNotFound(f"no run named {name!r} in {profile.where}") from None
    return json.loads(base64.b64decode(exported.content or ""))


def write_record(w: WorkspaceClient, profile: DatabricksProfile, name: str, record: dict[str, Any]) -> None:
    put_file(w, profile, f"{run_folder(profile, name)}/{RECORD_FILE}", json.dumps(record, sort_keys=True).encode())


def run_names(w: WorkspaceClient, profile: DatabricksProfile) -> list[str]:
    """The runs this launcher submitted with the profile: the folders of its workspace_dir."""
    from databricks.sdk import errors
    from databricks.sdk.service.workspace import ObjectType

    with calls(profile.where, f"listing {profile.workspace_dir}"):
        try:
            objects = list(w.workspace.list(profile.workspace_dir))
        except errors.DatabricksError as e:
            if getattr(e, "error_code", None) in ("RESOURCE_DOES_NOT_EXIST", "NOT_FOUND"):
                return []
            raise
    return [o.path.rsplit("/", 1)[-1] for o in objects if o.object_type == ObjectType.DIRECTORY and o.path]

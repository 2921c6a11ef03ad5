"""mcli's Secret classes and SecretType. Each builds the launcher's Secret of the same kind
(launcher.secrets.shapes, which checks it as `launcher secret create` does) for create_secret;
get_secrets returns them without values, as mcli does. Values never reach a repr."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from launcher.sdk.secrets import SecretInfo
    from launcher.secrets.kinds import Secret as LauncherSecret

__all__ = [
    "HuggingFaceSecret",
    "MCLIDatabricksSecret",
    "MCLIDockerRegistrySecret",
    "MCLIEnvVarSecret",
    "MCLIGCPSecret",
    "MCLIGenericSecret",
    "MCLIGitSSHSecret",
    "MCLIMountedSecret",
    "MCLIOCISecret",
    "MCLIS3Secret",
    "MCLISFTPSSHSecret",
    "MCLISSHSecret",
    "Secret",
    "SecretType",
]

SECRET_MOUNT_PATH_PARENT = "/secrets"


class SecretType(Enum):
    """The kinds of secret, by mcli's names."""

    docker_registry = "docker_registry"
    environment = "environment"
    generic = "generic"
    git = "git"
    mounted = "mounted"
    sftp = "sftp"
    ssh = "ssh"
    s3 = "s3"
    gcp = "gcp"
    oci = "oci"
    databricks = "databricks"
    hugging_face = "hugging_face"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def ensure_enum(cls, val: str | SecretType) -> SecretType:
        if isinstance(val, cls):
            return val
        try:
            return cls[str(val)] if str(val) != "s3_credentials" else cls.s3
        except KeyError:
            raise ValueError(f"Unknown secret type {val}") from None


def _secret_value():
    return field(default=None, repr=False)  # a value never reaches a repr (a log, a notebook cell)


@dataclass
class Secret:
    """A stored secret: its name, type and when it was created (no values)."""

    name: str
    secret_type: SecretType
    created_at: datetime | None = None
    id: str | None = None

    def __str__(self) -> str:
        return f"{self.name} ({self.secret_type})"

    def launcher_secret(self) -> LauncherSecret:
        """The launcher's Secret this one is, checked (an InputError says what no run could use)."""
        from launcher.errors import InputError

        raise InputError(f"a {type(self).__name__} holds no value to store; create one of mcli's secret kinds")


@dataclass
class MCLIGenericSecret(Secret):
    value: str | None = _secret_value()

    def launcher_secret(self) -> LauncherSecret:
        from launcher.errors import InputError

        raise InputError(
            f"secret {self.name!r}: a generic secret reaches no run; create an MCLIEnvVarSecret (an env var) "
            "or an MCLIMountedSecret (a file) instead"
        )


def _needs(secret: Secret, **values: str | None) -> dict[str, str]:
    """The values a kind needs, each one given (a missing one is an InputError naming it)."""
    from launcher.errors import InputError

    missing = [k for k, v in values.items() if v is None]
    if missing:
        raise InputError(f"secret {secret.name!r}: {type(secret).__name__} needs {', '.join(missing)}")
    return {k: v for k, v in values.items() if v is not None}


@dataclass
class MCLIEnvVarSecret(MCLIGenericSecret):
    """The environment variable `key` (default: the name, in upper case) set to `value` in every run."""

    key: str | None = None

    def launcher_secret(self) -> LauncherSecret:
        from launcher.secrets.shapes import env_secret

        v = _needs(self, value=self.value)
        return env_secret(self.key or self.name.upper().replace("-", "_"), v["value"], name=self.name)


@dataclass
class HuggingFaceSecret(MCLIEnvVarSecret):
    """HF_TOKEN, from `token` (or `value`)."""

    key: str | None = "HF_TOKEN"
    token: str | None = _secret_value()

    def launcher_secret(self) -> LauncherSecret:
        from launcher.secrets.shapes import hf_secret

        return hf_secret(_needs(self, token=self.token or self.value)["token"], name=self.name)


@dataclass
class MCLIMountedSecret(MCLIGenericSecret):
    """`value` as the file `<mount_path>/secret` (mount_path default: /secrets/NAME)."""

    mount_path: str | None = None

    def __post_init__(self) -> None:
        if self.mount_path is None:
            self.mount_path = f"{SECRET_MOUNT_PATH_PARENT}/{self.name}"

    def launcher_secret(self) -> LauncherSecret:
        from launcher.secrets.shapes import file_secret

        return file_secret(_needs(self, value=self.value)["value"], name=self.name, mount_path=self.mount_path)


@dataclass
class MCLISSHSecret(MCLIMountedSecret):
    """An SSH private key (`value`, the key file's text) mounted at mount_path."""

    def _key(self, kind_name: str, known_hosts: str | None = None) -> LauncherSecret:
        from launcher.secrets.kinds import SecretKind
        from launcher.secrets.shapes import key_secret

        key = _needs(self, value=self.value)["value"]
        return key_secret(
            SecretKind(kind_name), key, name=self.name, mount_path=self.mount_path, known_hosts=known_hosts
        )

    def launcher_secret(self) -> LauncherSecret:
        return self._key("ssh")


@dataclass
class MCLIGitSSHSecret(MCLISSHSecret):
    """An SSH key that git uses (GIT_SSH_COMMAND points at it)."""

    def launcher_secret(self) -> LauncherSecret:
        return self._key("git-ssh")


@dataclass
class MCLISFTPSSHSecret(MCLISSHSecret):
    """An SSH key for an SFTP object store, with the server's known_hosts."""

    known_hosts: str | None = None

    def launcher_secret(self) -> LauncherSecret:
        return self._key("sftp-ssh", self.known_hosts)


@dataclass
class MCLIS3Secret(Secret):
    """AWS `credentials` (and `config`) files' text, mounted at mount_directory; `profile` is AWS_PROFILE."""

    mount_directory: str | None = None
    credentials: str | None = _secret_value()
    config: str | None = _secret_value()
    profile: str | None = None

    def __post_init__(self) -> None:
        if self.mount_directory is None:
            self.mount_directory = f"{SECRET_MOUNT_PATH_PARENT}/{self.name}"

    def launcher_secret(self) -> LauncherSecret:
        from launcher.secrets.shapes import s3_secret

        credentials = _needs(self, credentials=self.credentials)["credentials"]
        return s3_secret(
            credentials, config=self.config, name=self.name, mount_path=self.mount_directory, profile=self.profile
        )


@dataclass
class MCLIGCPSecret(MCLIMountedSecret):
    """A GCP credentials JSON (`value`); GOOGLE_APPLICATION_CREDENTIALS points at it."""

    def launcher_secret(self) -> LauncherSecret:
        from launcher.secrets.shapes import gcp_secret

        return gcp_secret(_needs(self, value=self.value)["value"], name=self.name, mount_path=self.mount_path)


@dataclass
class MCLIOCISecret(Secret):
    """An OCI `config` and its API signing key (`key_file`, the key's text), mounted at mount_directory."""

    mount_directory: str | None = None
    key_file: str | None = _secret_value()
    config: str | None = _secret_value()

    def __post_init__(self) -> None:
        if self.mount_directory is None:
            self.mount_directory = f"{SECRET_MOUNT_PATH_PARENT}/{self.name}"

    def launcher_secret(self) -> LauncherSecret:
        from launcher.secrets.shapes import oci_secret

        v = _needs(self, config=self.config, key_file=self.key_file)
        return oci_secret(v["config"], v["key_file"], name=self.name, mount_path=self.mount_directory)


@dataclass
class MCLIDatabricksSecret(Secret):
    """DATABRICKS_HOST and DATABRICKS_TOKEN."""

    host: str | None = None
    token: str | None = _secret_value()

    def launcher_secret(self) -> LauncherSecret:
        from launcher.secrets.shapes import databricks_secret

        v = _needs(self, host=self.host, token=self.token)
        return databricks_secret(v["host"], v["token"], name=self.name)


@dataclass
class MCLIDockerRegistrySecret(Secret):
    """Image pull credentials for `server` (default: Docker Hub)."""

    username: str | None = None
    password: str | None = _secret_value()
    email: str | None = None
    server: str | None = None

    def launcher_secret(self) -> LauncherSecret:
        from launcher.secrets.shapes import DOCKER_HUB, docker_registry_secret

        v = _needs(self, username=self.username, password=self.password)
        return docker_registry_secret(
            name=self.name,
            server=self.server or DOCKER_HUB,
            username=v["username"],
            password=v["password"],
            email=self.email or "",
        )


# The launcher's kind -> mcli's class and type (an env secret setting HF_TOKEN is mcli's hugging_face).
_BY_KIND: dict[str, tuple[type[Secret], SecretType]] = {
    "env": (MCLIEnvVarSecret, SecretType.environment),
    "file": (MCLIMountedSecret, SecretType.mounted),
    "docker-registry": (MCLIDockerRegistrySecret, SecretType.docker_registry),
    "ssh": (MCLISSHSecret, SecretType.ssh),
    "git-ssh": (MCLIGitSSHSecret, SecretType.git),
    "sftp-ssh": (MCLISFTPSSHSecret, SecretType.sftp),
    "s3": (MCLIS3Secret, SecretType.s3),
    "gcp": (MCLIGCPSecret, SecretType.gcp),
    "oci": (MCLIOCISecret, SecretType.oci),
    "databricks": (MCLIDatabricksSecret, SecretType.databricks),
    "hf": (HuggingFaceSecret, SecretType.hugging_face),
}
# mcli's type -> the launcher's kind, for get_secrets(secret_types=...).
KIND_OF_TYPE = {t: kind for kind, (_, t) in _BY_KIND.items()}


def from_info(info: SecretInfo) -> Secret:
    """mcli's Secret of a stored secret, without its values."""
    cls, secret_type = _BY_KIND[info.kind]
    secret = cls(name=info.name, secret_type=secret_type, created_at=info.created_at)
    mount = info.options.get("mount_path")
    if mount and hasattr(secret, "mount_path"):
        secret.mount_path = mount
    if mount and hasattr(secret, "mount_directory"):
        secret.mount_directory = mount
    if isinstance(secret, MCLIEnvVarSecret) and info.options.get("env_key"):
        secret.key = info.options["env_key"]
    if isinstance(secret, MCLIS3Secret):
        secret.profile = info.options.get("profile")
    if isinstance(secret, MCLIDockerRegistrySecret):
        secret.server = info.options.get("server")
    return secret

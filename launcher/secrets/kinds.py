"""Secret kinds, and what each becomes inside a run.

A secret holds `data` (the values, never shown) and `options` (non-secret
settings such as the env var name or the mount path). `project()` says how a
secret reaches the run's processes, in terms every backend can apply: env vars
taken from data keys, files written from data keys under a mount directory, and
plain env vars that point at those files. The local backend resolves them into
its processes' environment and a private directory; the Kubernetes backend
turns the same projection into secretKeyRef env vars and a Secret volume.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from datetime import datetime
from posixpath import normpath

from launcher.secrets.mask import MASK, MIN_MASK_LEN, mask_candidates, too_short_to_mask  # noqa: F401


class SecretKind(str, enum.Enum):
    ENV = "env"
    FILE = "file"
    DOCKER_REGISTRY = "docker-registry"
    SSH = "ssh"
    GIT_SSH = "git-ssh"
    S3 = "s3"
    GCP = "gcp"
    DATABRICKS = "databricks"
    HF = "hf"

    def __str__(self) -> str:
        return self.value


SECRET_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass
class Secret:
    name: str
    kind: SecretKind
    data: dict[str, str] = field(repr=False)
    options: dict[str, str] = field(default_factory=dict)
    created_at: datetime | None = None

    def __repr__(self) -> str:  # never let a value reach a log through repr()
        return f"Secret(name={self.name!r}, kind={self.kind.value!r}, keys={sorted(self.data)})"

    def masked_values(self) -> list[str]:
        """The values that must never appear in logs (host names and such are public)."""
        out = []
        for key, value in self.secret_data().items():
            out.extend(mask_candidates(value))
        return sorted(set(out), key=len, reverse=True)

    def secret_data(self) -> dict[str, str]:
        """The data keys whose values are secret (not the public ones, such as a host)."""
        public = PUBLIC_KEYS.get(self.kind, set())
        return {k: v for k, v in self.data.items() if k not in public}

    def too_short_keys(self) -> list[str]:
        """Data keys whose values are too short to be masked in logs."""
        return [k for k, v in self.secret_data().items() if too_short_to_mask(v)]


# Data keys that are not secret, and the env vars they become: never masked, so a
# log can say which workspace a run talks to.
PUBLIC_KEYS: dict[SecretKind, set[str]] = {SecretKind.DATABRICKS: {"host"}}
PUBLIC_ENV = frozenset({"DATABRICKS_HOST"})


@dataclass
class Projection:
    env: dict[str, str] = field(default_factory=dict)
    """env var -> data key"""
    files: dict[str, str] = field(default_factory=dict)
    """file name under mount_path -> data key"""
    mount_path: str | None = None
    plain_env: dict[str, str] = field(default_factory=dict)
    """env var -> value; `{mount}` stands for the directory the files were placed in"""
    image_pull: bool = False


def env_suffix(name: str) -> str:
    return re.sub(r"[^A-Z0-9_]", "_", name.upper())


def default_mount(secret: Secret) -> str:
    return f"/secrets/{secret.name}"


def project(secret: Secret) -> Projection:
    k, o, n = secret.kind, secret.options, secret.name
    mount = o.get("mount_path") or default_mount(secret)
    if k is SecretKind.ENV:
        return Projection(env={o["env_key"]: "value"})
    if k is SecretKind.FILE:
        return Projection(files={"secret": "value"}, mount_path=mount,
                          plain_env={f"SECRET_PATH_{env_suffix(n)}": "{mount}/secret"})
    if k is SecretKind.DOCKER_REGISTRY:
        return Projection(image_pull=True)
    if k is SecretKind.SSH:
        return Projection(files={"id": "private_key"}, mount_path=mount,
                          plain_env={f"SECRET_PATH_{env_suffix(n)}": "{mount}/id"})
    if k is SecretKind.GIT_SSH:
        return Projection(
            files={"id": "private_key"}, mount_path=mount,
            plain_env={
                f"SECRET_PATH_{env_suffix(n)}": "{mount}/id",
                "GIT_SSH_COMMAND": "ssh -o StrictHostKeyChecking=no -o IdentitiesOnly=yes -i {mount}/id",
            },
        )
    if k is SecretKind.S3:
        files = {"credentials": "credentials"}
        env = {"AWS_SHARED_CREDENTIALS_FILE": "{mount}/credentials"}
        if "config" in secret.data:
            files["config"] = "config"
            env["AWS_CONFIG_FILE"] = "{mount}/config"
        return Projection(files=files, mount_path=mount, plain_env=env)
    if k is SecretKind.GCP:
        return Projection(files={"credentials.json": "credentials"}, mount_path=mount,
                          plain_env={"GOOGLE_APPLICATION_CREDENTIALS": "{mount}/credentials.json"})
    if k is SecretKind.DATABRICKS:
        return Projection(env={"DATABRICKS_HOST": "host", "DATABRICKS_TOKEN": "token"})
    if k is SecretKind.HF:
        return Projection(env={"HF_TOKEN": "token"})
    raise AssertionError(k)


def check_name(name: str) -> str | None:
    """Why `name` is not a valid secret name, or None."""
    if not SECRET_NAME.match(name) or len(name) > 63:
        return f"secret names are lowercase letters, digits and '-', at most 63 characters, got {name!r}"
    return None


# What a run's processes rely on finding where it is: a mount at, above or (for the
# kernel's and the config's own mounts) below one of these would hide it.
RESERVED_MOUNTS = {
    "/etc": "the run's /etc (users, hosts, certificates)",
    "/mnt/config": "the run's config mount (parameters.yaml, run_config.yaml)",
    "/proc": "the kernel's /proc",
    "/sys": "the kernel's /sys",
    "/dev": "the run's devices (/dev, its GPUs and /dev/shm)",
}
# A new directory under /etc (mcli's /etc/secret, /etc/ssh-key) hides nothing of it.
RESERVED_INSIDE = ("/mnt/config", "/proc", "/sys", "/dev")


def check_mount_path(path: str) -> str | None:
    """Why `path` cannot be where a secret is mounted, or None. It must be absolute and
    normalised (no `.`, `..`, `//`, trailing `/` or control character): a relative or
    climbing path would land somewhere else on every machine. It must not hide what a run
    relies on (RESERVED_MOUNTS): not /etc itself or a parent of it, nor /mnt/config, /proc,
    /sys or /dev, a parent of one or a path inside one."""
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return f"the mount path must not hold a control character (a newline, a tab), got {path!r}"
    if not path.startswith("/"):
        return f"the mount path must be absolute (start with /), got {path!r}"
    if ".." in path.split("/"):
        return f"the mount path must not contain '..', got {path!r}"
    if path == "/" or normpath(path) != path or path.startswith("//"):
        better = "/" + normpath(path).lstrip("/") if path != "/" else "/secrets/NAME"
        return f"the mount path must be a normalised directory other than / (e.g. {better!r}), got {path!r}"
    for reserved, what in RESERVED_MOUNTS.items():
        inside = reserved in RESERVED_INSIDE and path.startswith(reserved + "/")
        if path == reserved or reserved.startswith(path + "/") or inside:
            how = "would lie inside" if inside else "would hide"
            return f"the mount path {path} {how} {what}; pick a directory of its own, such as /secrets/NAME"
    return None


def _nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def exposed(secret: Secret) -> list[str]:
    """What a run sees of `secret`: env var names and the mount path, for listings."""
    proj = project(secret)
    out = list(proj.env) + list(proj.plain_env)
    if proj.mount_path:
        out.append(f"{proj.mount_path}/")
    if proj.image_pull:
        out.append("imagePullSecrets")
    return out


def collision(secrets: list[Secret]) -> str | None:
    """Why these secrets cannot go into one run together: two of them set the same
    env var or mount at the same path, or one inside the other (mcli silently lets one
    win). None if they can."""
    seen: dict[str, str] = {}
    mounts: dict[str, str] = {}
    for s in secrets:
        proj = project(s)
        places = [f"env var {v}" for v in [*proj.env, *proj.plain_env]]
        if proj.mount_path:
            places.append(f"mount path {proj.mount_path}")
        for place in places:
            other = seen.setdefault(place, s.name)
            if other != s.name:
                return (f"secrets {other!r} and {s.name!r} both set the {place}; "
                        f"choose one with `secrets:` in the run YAML")
        if proj.mount_path:
            for other, path in mounts.items():
                if other != s.name and _nested(proj.mount_path, path):
                    return (f"secrets {other!r} and {s.name!r} mount one inside the other ({path} and "
                            f"{proj.mount_path}): one would hide the other; give one another --mount-path, or "
                            "choose one with `secrets:` in the run YAML")
            mounts[s.name] = proj.mount_path
    return None

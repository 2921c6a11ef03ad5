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

import base64
import binascii
import configparser
import enum
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from posixpath import normpath
from urllib.parse import urlsplit

from launcher.pod.contract import MAX_ARG_STRLEN
from launcher.secrets.mask import MASK, MIN_MASK_LEN, mask_candidates, too_short_to_mask  # noqa: F401


class SecretKind(str, enum.Enum):
    ENV = "env"
    FILE = "file"
    DOCKER_REGISTRY = "docker-registry"
    SSH = "ssh"
    GIT_SSH = "git-ssh"
    SFTP_SSH = "sftp-ssh"
    S3 = "s3"
    GCP = "gcp"
    DATABRICKS = "databricks"
    HF = "hf"
    OCI = "oci"

    def __str__(self) -> str:
        return self.value


# Other names a user types for a kind: mcli's (`create secret environment|mounted|docker|hugging_face`,
# and its SecretType values that `get secrets --type` shows).
KIND_ALIASES = {
    "environment": SecretKind.ENV,
    "mounted": SecretKind.FILE,
    "docker": SecretKind.DOCKER_REGISTRY,
    "docker_registry": SecretKind.DOCKER_REGISTRY,
    "git": SecretKind.GIT_SSH,
    "git_ssh": SecretKind.GIT_SSH,
    "sftp": SecretKind.SFTP_SSH,
    "sftp_ssh": SecretKind.SFTP_SSH,
    "hugging_face": SecretKind.HF,
    "hugging-face": SecretKind.HF,
    "huggingface": SecretKind.HF,
}


def kind_named(text: str) -> SecretKind | None:
    """The kind `text` names, in our spelling or mcli's (any case), or None."""
    word = text.strip().lower()
    try:
        return SecretKind(word)
    except ValueError:
        return KIND_ALIASES.get(word)


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
        for _key, value in self.secret_data().items():
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
        return Projection(
            files={"secret": "value"}, mount_path=mount, plain_env={f"SECRET_PATH_{env_suffix(n)}": "{mount}/secret"}
        )
    if k is SecretKind.DOCKER_REGISTRY:
        return Projection(image_pull=True)
    if k is SecretKind.SSH:
        return Projection(
            files={"id": "private_key"}, mount_path=mount, plain_env={f"SECRET_PATH_{env_suffix(n)}": "{mount}/id"}
        )
    if k is SecretKind.GIT_SSH:
        return Projection(
            files={"id": "private_key"},
            mount_path=mount,
            plain_env={
                f"SECRET_PATH_{env_suffix(n)}": "{mount}/id",
                "GIT_SSH_COMMAND": "ssh -o StrictHostKeyChecking=no -o IdentitiesOnly=yes -i {mount}/id",
            },
        )
    if k is SecretKind.SFTP_SSH:  # the variables Composer's SFTP object store reads
        return Projection(
            files={"id": "private_key", "known_hosts": "known_hosts"},
            mount_path=mount,
            plain_env={
                f"SECRET_PATH_{env_suffix(n)}": "{mount}/id",
                "COMPOSER_SFTP_KEY_FILE": "{mount}/id",
                "COMPOSER_SFTP_KNOWN_HOSTS_FILE": "{mount}/known_hosts",
            },
        )
    if k is SecretKind.S3:
        files = {"credentials": "credentials"}
        env = {"AWS_SHARED_CREDENTIALS_FILE": "{mount}/credentials"}
        if "config" in secret.data:
            files["config"] = "config"
            env["AWS_CONFIG_FILE"] = "{mount}/config"
        if o.get("profile"):
            env["AWS_PROFILE"] = o["profile"]
        return Projection(files=files, mount_path=mount, plain_env=env)
    if k is SecretKind.OCI:  # the variables the OCI CLI and SDKs read
        return Projection(
            files={"config": "config", "key_file": "key_file"},
            mount_path=mount,
            plain_env={"OCI_CLI_CONFIG_FILE": "{mount}/config", "OCI_CLI_KEY_FILE": "{mount}/key_file"},
        )
    if k is SecretKind.GCP:
        return Projection(
            files={"credentials.json": "credentials"},
            mount_path=mount,
            plain_env={"GOOGLE_APPLICATION_CREDENTIALS": "{mount}/credentials.json"},
        )
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
# The system's own directories: a mount at or above one hides the programs and libraries
# every run needs (on the local backend, as root, a directory created inside one lands on
# the machine's own /usr or /bin), so no secret goes at, above or inside them.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot")
RESERVED_MOUNTS.update({d: f"the system's {d}" for d in SYSTEM_DIRS})
# Hidden by a mount at or above them; a directory inside them is the run's own.
RESERVED_MOUNTS.update(
    {
        "/var": "the system's /var",
        "/run": "the system's /run",
        "/tmp": "the run's /tmp",
        "/opt": "the software installed in /opt",
        "/root": "root's home directory",
    }
)
# A new directory under /etc (mcli's /etc/secret, /etc/ssh-key) hides nothing of it.
RESERVED_INSIDE = ("/mnt/config", "/proc", "/sys", "/dev", *SYSTEM_DIRS)


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


# Environment variables the run's environment owns: the shell and the interpreter read them,
# the launcher and the rank launcher set them. A secret that sets one breaks every run it
# reaches (PATH: no program found; LAUNCHER_HOME: no supervisor; RANK: ranks that disagree).
OWNED_ENV = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "TMPDIR", "IFS", "ENV",
        "BASH_ENV", "SHELLOPTS", "BASHOPTS", "CDPATH",
        "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "NODE_RANK", "WORLD_SIZE",
        "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
        "RUN_NAME", "COMPOSER_RUN_NAME", "CUDA_VISIBLE_DEVICES",
    }
)  # fmt: skip
OWNED_ENV_PREFIXES = ("LD_", "PYTHON", "LAUNCHER_", "PET_", "TORCHELASTIC_", "BASH_FUNC_")


def owned_env(var: str) -> bool:
    """Whether the run's environment owns `var`, so that no secret may set it."""
    return var in OWNED_ENV or var.startswith(OWNED_ENV_PREFIXES)


def breaks_runs(secret: Secret) -> str | None:
    """Why `secret` would break every run it reaches, or None: an environment variable the
    run's environment owns (owned_env), or a mount path no run may use (check_mount_path).
    The one rule `secret create` refuses a new secret by, and `validate` and `run` a stored
    one (made before the rule, or outside the launcher), in the same words."""
    proj = project(secret)
    for var in [*proj.env, *proj.plain_env]:
        if owned_env(var):
            return (
                f"it sets the environment variable {var}, which the run's own environment owns "
                f"(PATH, HOME, LD_*, PYTHON*, LAUNCHER_*, the rank variables): it would break every run it "
                f"reaches; give it another variable name"
            )
    if proj.mount_path:
        return check_mount_path(proj.mount_path)
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
                return (
                    f"secrets {other!r} and {s.name!r} both set the {place}; choose one with `secrets:` in the run YAML"
                )
        if proj.mount_path:
            for other, path in mounts.items():
                if other != s.name and _nested(proj.mount_path, path):
                    return (
                        f"secrets {other!r} and {s.name!r} mount one inside the other ({path} and "
                        f"{proj.mount_path}): one would hide the other; give one another --mount-path, or "
                        "choose one with `secrets:` in the run YAML"
                    )
            mounts[s.name] = proj.mount_path
    return None


def check_record(secret: Secret) -> str | None:
    """Why no run could use `secret` as it is stored, or None: what its kind needs to reach
    a run (an env secret's variable name, the data keys it projects) and what an environment
    variable can hold. Checked on every read of the local store, and at create."""
    options = secret.options
    if secret.kind is SecretKind.ENV:
        key = options.get("env_key")
        if not isinstance(key, str) or not key:
            return "it is an env secret without options.env_key (the variable it sets)"
        if "=" in key or "\0" in key:
            return f"its options.env_key {key!r} cannot name an environment variable"
    if not isinstance(options.get("mount_path", ""), str):
        return "its options.mount_path is not a string"
    proj = project(secret)
    missing = sorted({*proj.env.values(), *proj.files.values()} - set(secret.data))
    if missing:
        return f"its data has no {', '.join(missing)}"
    for var, key in proj.env.items():
        problem = _env_value_problem(var, secret.data[key])
        if problem:
            return f"{_its(key)} {problem}"
    return None


def check_new(secret: Secret) -> str | None:
    """Why `secret` cannot be created, or None: check_record's reasons, and a file that does
    not parse as its kind (a gcp credentials JSON, s3 INI files, an SSH private key, a
    registry's auth, a workspace URL). The reasons never quote a value."""
    problem = check_record(secret)
    if problem:
        return problem
    check = _CONTENT_CHECKS.get(secret.kind)
    return check(secret.data) if check else None


def _its(key: str) -> str:
    return "its value" if key == "value" else f"its {key}"


def _env_value_problem(var: str, value: str) -> str | None:
    try:
        size = len(f"{var}={value}".encode()) + 1
    except UnicodeEncodeError:
        return "is not UTF-8 text"
    if "\0" in value:
        return f"holds a NUL byte, which no environment variable ({var}) can hold"
    if size > MAX_ARG_STRLEN:
        return (
            f"is too long for an environment variable: {var}=VALUE would be {size:,} bytes, and exec takes "
            f"at most {MAX_ARG_STRLEN:,} (128 KiB, Linux's MAX_ARG_STRLEN); a larger value belongs in a "
            "file secret (`launcher secret create file`)"
        )
    return None


_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY-----")
_BASE64_LINE = re.compile(r"[A-Za-z0-9+/=]+")


def private_key_problem(text: str) -> str | None:
    """Why `text` is not a private key file as ssh reads one (OpenSSH, or PEM: PKCS#1, #8,
    EC), or None. Its frame and base64 body only: the key itself is not decoded."""
    lines = [line.strip() for line in text.strip().splitlines()]
    first = lines[0] if lines else ""
    if first.startswith(("ssh-", "ecdsa-", "sk-")) or "PUBLIC KEY" in first:
        return "it is a public key; pass the private key (e.g. ~/.ssh/id_ed25519, not id_ed25519.pub)"
    begin = _PEM_BEGIN.fullmatch(first)
    if not begin:
        return "it does not start with a private key's -----BEGIN ... PRIVATE KEY----- line (OpenSSH or PEM)"
    end = f"-----END {begin.group(1)}PRIVATE KEY-----"
    if end not in lines:
        return f"it has no {end} line"
    # PEM headers such as Proc-Type: and DEK-Info: (an encrypted PKCS#1 key) come before the body.
    body = [line for line in lines[1 : lines.index(end)] if line and ":" not in line]
    if not body:
        return "it holds nothing between its BEGIN and END lines"
    if not all(_BASE64_LINE.fullmatch(line) for line in body):
        return "what lies between its BEGIN and END lines is not base64"
    return None


# google-auth's credential types (google.auth._default), and the keys it needs of each.
_GCP_NEEDS = {
    "service_account": ("client_email", "private_key", "token_uri"),
    "authorized_user": ("client_id", "client_secret", "refresh_token"),
    "external_account": ("audience", "subject_token_type", "credential_source"),
    "external_account_authorized_user": (),
    "impersonated_service_account": ("source_credentials",),
    "gdch_service_account": (),
}


def _gcp_problem(data: dict[str, str]) -> str | None:
    try:
        creds = json.loads(data["credentials"])
    except json.JSONDecodeError as e:  # the message says where, never what
        return f"its credentials file is not JSON ({e.msg}: line {e.lineno} column {e.colno})"
    except ValueError:  # a number past Python's digit limit: its message says no place
        return "its credentials file is not JSON that can be read (a number in it has too many digits)"
    if not isinstance(creds, dict):
        return "its credentials file is not a JSON object (a service-account key file is one)"
    kind = creds.get("type")
    if kind not in _GCP_NEEDS:
        return (
            f'its credentials file\'s "type" is {kind!r}, not a Google credentials type '
            f'({", ".join(_GCP_NEEDS)}); a service-account key file has "type": "service_account"'
        )
    missing = [k for k in _GCP_NEEDS[kind] if not creds.get(k)]
    if missing:
        article = "an" if kind[0] in "aeiou" else "a"
        return f"its credentials file is {article} {kind} without {', '.join(missing)}"
    if kind == "service_account":
        if not isinstance(creds["private_key"], str):
            return "its credentials file's private_key is not a string"
        problem = private_key_problem(creds["private_key"])
        if problem:
            return f"its credentials file's private_key is not a PEM private key: {problem}"
    return None


# A section name no INI file has: [DEFAULT] then reads as a profile of its own (OCI's main one).
NO_DEFAULT_SECTION = "\0"


def ini_sections(
    text: str, what: str, *, kind: str = "AWS", default_section: str = "DEFAULT"
) -> tuple[dict[str, dict[str, str]], str | None]:
    """The sections of an AWS (or OCI) INI file, read as botocore reads it (RawConfigParser), or why not."""

    parser = configparser.RawConfigParser(default_section=default_section)
    try:
        parser.read_string(text)
    except configparser.MissingSectionHeaderError as e:  # its message quotes the line: a key, maybe
        return {}, f"its {what} file is not an {kind} INI file: line {e.lineno} comes before any [profile] header"
    except configparser.DuplicateSectionError as e:
        return {}, f"its {what} file has the section [{e.section}] twice (line {e.lineno})"
    except configparser.DuplicateOptionError as e:
        return {}, f"its {what} file has {e.option} twice in [{e.section}] (line {e.lineno})"
    except configparser.ParsingError as e:
        lines = ", ".join(str(n) for n, _ in e.errors[:5])
        return {}, f"its {what} file is not an {kind} INI file: line {lines} is not a [section] or key = value"
    except configparser.Error as e:
        return {}, f"its {what} file is not an {kind} INI file ({type(e).__name__})"
    sections = {name: dict(parser.items(name)) for name in parser.sections()}
    if not sections:
        return {}, f"its {what} file has no [profile] section"
    return sections, None


def _s3_problem(data: dict[str, str]) -> str | None:
    profiles, problem = ini_sections(data["credentials"], "credentials")
    if problem:
        return problem
    if not any(p.get("aws_access_key_id") and p.get("aws_secret_access_key") for p in profiles.values()):
        return (
            "its credentials file has no profile with both aws_access_key_id and aws_secret_access_key "
            f"(profiles: {', '.join(profiles)})"
        )
    if "config" in data:
        return ini_sections(data["config"], "config")[1]
    return None


def _ssh_problem(data: dict[str, str]) -> str | None:
    problem = private_key_problem(data["private_key"])
    return f"its key file is not a private key: {problem}" if problem else None


def _sftp_problem(data: dict[str, str]) -> str | None:
    problem = _ssh_problem(data)
    if problem:
        return problem
    hosts = [line for line in data.get("known_hosts", "").splitlines() if line.strip() and not line.startswith("#")]
    if not hosts or not all(len(line.split()) >= 3 for line in hosts):
        return "its known_hosts holds no host key lines (HOST KEYTYPE KEY, as ssh-keyscan prints them)"
    return None


# What the OCI SDK needs of a config profile (oci.config.validate_config); key_file is the mounted key.
OCI_NEEDS = ("user", "fingerprint", "tenancy", "region")


def _oci_problem(data: dict[str, str]) -> str | None:
    profiles, problem = ini_sections(data["config"], "config", kind="OCI", default_section=NO_DEFAULT_SECTION)
    if problem:
        return problem
    if not any(all(p.get(k) for k in OCI_NEEDS) for p in profiles.values()):
        return f"its config file has no profile with {', '.join(OCI_NEEDS)} (profiles: {', '.join(profiles)})"
    problem = private_key_problem(data["key_file"])
    return f"its key file is not a PEM private key: {problem}" if problem else None


def _docker_registry_problem(data: dict[str, str]) -> str | None:
    if ".dockerconfigjson" not in data:  # the parts, as the Kubernetes store also takes them
        entries = {data.get("server") or "the server": data}
    else:
        try:
            entries = json.loads(data[".dockerconfigjson"]).get("auths")
        except (ValueError, AttributeError):
            return "its .dockerconfigjson is not a JSON object"
        if not isinstance(entries, dict) or not entries:
            return "its .dockerconfigjson has no auths"
    for server, entry in entries.items():
        if not server.strip() or any(c.isspace() or not c.isprintable() for c in server):
            return f"its server {server!r} is not a registry host name"
        if not isinstance(entry, dict):
            return f"its entry for {server} is not a mapping"
        user = entry.get("username")
        if "auth" in entry and not user:
            try:
                user, sep, _ = base64.b64decode(entry["auth"], validate=True).decode().partition(":")
            except (binascii.Error, ValueError, TypeError):
                return f"its auth for {server} is not base64 of username:password"
            if not sep:
                return f"its auth for {server} is not base64 of username:password"
        if not user:
            return f"its entry for {server} has no username"
        if ":" in user:
            return f"its username for {server} holds a ':', which a registry's username:password auth cannot"
        if not entry.get("password") and "auth" not in entry:
            return f"its entry for {server} has no password"
    return None


def _databricks_problem(data: dict[str, str]) -> str | None:
    host = data["host"]
    try:  # the SDK takes a bare host name as https://
        url = urlsplit(host if "://" in host else f"https://{host}")
        ok = url.scheme in ("https", "http") and url.hostname and not any(c.isspace() for c in host)
    except ValueError:
        ok = False
    return None if ok else f"its host {host!r} is not a workspace URL (e.g. https://dbc-1234.cloud.databricks.com)"


_CONTENT_CHECKS = {
    SecretKind.GCP: _gcp_problem,
    SecretKind.S3: _s3_problem,
    SecretKind.SSH: _ssh_problem,
    SecretKind.GIT_SSH: _ssh_problem,
    SecretKind.SFTP_SSH: _sftp_problem,
    SecretKind.OCI: _oci_problem,
    SecretKind.DOCKER_REGISTRY: _docker_registry_problem,
    SecretKind.DATABRICKS: _databricks_problem,
}

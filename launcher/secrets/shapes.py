"""The secrets a user asks for, kind by kind: mcli's `create secret` shapes and ours, built
from values the caller has already read. The CLI reads them from files, stdin or a hidden
prompt; the SDK takes them as arguments. Each builder returns a Secret that `checked` passed
(its name, its mount path, and kinds.check_new: what no run could use), or raises InputError.
No message quotes a value."""

from __future__ import annotations

import configparser
import io
import re
import subprocess
from pathlib import PurePath

from launcher.errors import InputError
from launcher.secrets.kinds import (
    NO_DEFAULT_SECTION,
    Secret,
    SecretKind,
    breaks_runs,
    check_mount_path,
    check_name,
    check_new,
    ini_sections,
    kind_named,
)

DOCKER_HUB = "https://index.docker.io/v1/"
# The name a secret of these kinds gets when none is given: a run has at most one of each.
DEFAULT_NAMES = {
    SecretKind.S3: "s3",
    SecretKind.GCP: "gcp",
    SecretKind.DATABRICKS: "databricks",
    SecretKind.HF: "hf",
    SecretKind.OCI: "oci",
}
ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def name_from(text: str) -> str:
    """A secret name made of `text` (an env var, a file's stem): lowercase, '-' for the rest,
    as mcli's ensure_rfc1123_compatibility does. `API_TOKEN` is `api-token`, `id_ed25519` is
    `id-ed25519`. A name too long is check_name's error, not cut short."""
    return re.sub(r"[^a-z0-9-]", "-", text.lower()).strip("-") or "secret"


def name_from_path(path: str) -> str:
    return name_from(PurePath(path).stem or PurePath(path).name)


def split_env_pair(pair: str) -> tuple[str, str | None]:
    """KEY and VALUE of `KEY=VALUE`; VALUE None for a bare `KEY`."""
    key, sep, value = pair.partition("=")
    if not ENV_KEY.match(key):
        raise InputError(
            f"{key!r} is not a valid environment variable name",
            hint="a KEY is letters, digits and '_', not starting with a digit (KEY=VALUE)",
        )
    return key, value if sep else None


def checked(secret: Secret) -> Secret:
    """`secret` if it can be created, else InputError with the reason."""
    problem = check_name(secret.name)
    if problem:
        raise InputError(problem)
    if "mount_path" in secret.options:
        problem = check_mount_path(secret.options["mount_path"])
        if problem:
            raise InputError(f"secret {secret.name!r}: --mount-path: {problem}")
    problem = breaks_runs(secret)  # the rule `validate` and `run` refuse a stored secret by
    if problem:
        raise InputError(f"secret {secret.name!r}: {problem}")
    problem = check_new(secret)  # what no run could use is refused here, not in every run after
    if problem:
        raise InputError(f"secret {secret.name!r}: {problem}")
    return secret


def _mount(mount_path: str | None) -> dict[str, str]:
    return {"mount_path": mount_path} if mount_path else {}


def env_secret(key: str, value: str, *, name: str | None = None) -> Secret:
    """The env var KEY for every run; the name defaults to KEY's (API_TOKEN: api-token)."""
    split_env_pair(key)
    return checked(Secret(name or name_from(key), SecretKind.ENV, {"value": value}, {"env_key": key}))


def file_secret(value: str, *, name: str, mount_path: str | None = None) -> Secret:
    """A file at <mount_path>/secret, mcli's `mounted`; mount_path defaults to /secrets/NAME."""
    return checked(Secret(name, SecretKind.FILE, {"value": value}, {"mount_path": mount_path or f"/secrets/{name}"}))


def docker_registry_secret(*, name: str, server: str, username: str, password: str, email: str = "") -> Secret:
    """Image pull credentials, kept as their parts: the Kubernetes store makes them the
    .dockerconfigjson of a kubernetes.io/dockerconfigjson Secret, which a kubelet reads."""
    data = {"server": server, "username": username, "password": password, **({"email": email} if email else {})}
    return checked(Secret(name, SecretKind.DOCKER_REGISTRY, data, {"server": server}))


def key_secret(
    kind: SecretKind, private_key: str, *, name: str, mount_path: str | None = None, known_hosts: str | None = None
) -> Secret:
    """An ssh, git-ssh or sftp-ssh private key (sftp-ssh also takes the server's known_hosts)."""
    data = {"private_key": private_key}
    if kind is SecretKind.SFTP_SSH:
        data["known_hosts"] = known_hosts or ""
    return checked(Secret(name, kind, data, _mount(mount_path)))


def s3_secret(
    credentials: str,
    *,
    config: str | None = None,
    name: str = "s3",
    mount_path: str | None = None,
    profile: str | None = None,
) -> Secret:
    """AWS credentials (and config) files; `profile` becomes AWS_PROFILE and must be in the credentials."""
    data = {"credentials": credentials, **({"config": config} if config is not None else {})}
    options = {**_mount(mount_path), **({"profile": profile} if profile else {})}
    secret = checked(Secret(name, SecretKind.S3, data, options))
    if profile:
        profiles, _ = ini_sections(credentials, "credentials")
        if profile not in profiles:
            raise InputError(
                f"secret {name!r}: --profile {profile!r} is not a profile of its credentials file "
                f"(profiles: {', '.join(profiles)})"
            )
    return secret


def gcp_secret(credentials: str, *, name: str = "gcp", mount_path: str | None = None) -> Secret:
    return checked(Secret(name, SecretKind.GCP, {"credentials": credentials}, _mount(mount_path)))


class _CaseKeepingParser(configparser.RawConfigParser):
    def optionxform(self, optionstr: str) -> str:
        return optionstr  # keep the keys' case as written


def oci_secret(config: str, key_file: str, *, name: str = "oci", mount_path: str | None = None) -> Secret:
    """An OCI config and API signing key. Every profile's key_file is pointed at the mounted key,
    as mcli does for the DEFAULT one: the path in the user's config exists only on their machine."""
    mount = mount_path or f"/secrets/{name}"
    parser = _CaseKeepingParser(default_section=NO_DEFAULT_SECTION)
    try:
        parser.read_string(config)
    except configparser.Error:
        rewritten = config  # check_new names what is wrong with it
    else:
        for section in parser.sections():
            if parser.has_option(section, "key_file"):
                parser.set(section, "key_file", f"{mount}/key_file")
        out = io.StringIO()
        parser.write(out)
        rewritten = out.getvalue()
    return checked(Secret(name, SecretKind.OCI, {"config": rewritten, "key_file": key_file}, _mount(mount_path)))


def databricks_secret(host: str, token: str, *, name: str = "databricks") -> Secret:
    return checked(Secret(name, SecretKind.DATABRICKS, {"host": host, "token": token}))


def hf_secret(token: str, *, name: str = "hf") -> Secret:
    return checked(Secret(name, SecretKind.HF, {"token": token}))


def key_path_and_name(argument: str | None, source: str | None, name: str | None) -> tuple[str | None, str | None]:
    """The key file and the secret name of `ssh|git-ssh|sftp-ssh ARGUMENT [--from FILE] [--name N]`.
    With --from (our shape) ARGUMENT is the name; without it (mcli's) ARGUMENT is the key file and
    the name defaults to its stem (~/.ssh/id_ed25519: id-ed25519)."""
    if source:
        if argument and name and argument != name:
            raise InputError(f"two names: {argument!r} and --name {name!r}; give one")
        return source, name or argument
    return argument, name or (name_from_path(argument) if argument else None)


def scan_known_hosts(host: str, *, timeout: float = 30) -> str:
    """`ssh-keyscan HOST`'s output: the host's public keys, for the run's known_hosts."""
    if host.startswith("-") or not host.strip():
        raise InputError(f"--host-name {host!r} is not a host name")
    try:
        done = subprocess.run(["ssh-keyscan", "-T", "10", host], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise InputError(
            "ssh-keyscan is not installed, and it reads the SFTP server's host keys",
            hint="install OpenSSH's client, or pass the keys with --known-hosts FILE",
        ) from None
    except subprocess.TimeoutExpired:
        raise InputError(
            f"ssh-keyscan {host} did not answer in {timeout:.0f} s",
            hint="check the host name and that port 22 is open, or pass --known-hosts FILE",
        ) from None
    keys = "".join(line + "\n" for line in done.stdout.splitlines() if line.strip() and not line.startswith("#"))
    if not keys:
        raise InputError(
            f"ssh-keyscan {host} found no host keys (is port 22 open there?)",
            hint="check the host name, or pass the keys with --known-hosts FILE",
        )
    return keys


def kinds_named(words: list[str] | tuple[str, ...]) -> set[SecretKind]:
    """The kinds `get secrets --type` names, in our spelling or mcli's."""
    out = set()
    for word in words:
        kind = kind_named(word)
        if kind is None:
            known = ", ".join(k.value for k in SecretKind)
            raise InputError(
                f"--type {word!r} is not a secret kind (known: {known}, or mcli's environment, "
                "mounted, docker, hugging_face)"
            )
        out.add(kind)
    return out

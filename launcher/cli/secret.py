"""`launcher secret create|list|delete`.

Values never come from the command line unless the user puts them there
(`env NAME=VALUE`): they are read from a file, from stdin, or from a hidden
prompt, so they stay out of shell history.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from launcher.cli.common import OK, confirm, dump, print_table, warn


def _store(cluster: str | None):
    from launcher.backends.registry import open_secret_store, resolve_profile

    return open_secret_store(resolve_profile(cluster=cluster))


# A Kubernetes Secret holds at most 1 MiB; so does a local one.
MAX_SECRET_FILE = 1 << 20


def _read_value(what: str, name: str) -> str:
    """A secret value from stdin (piped) or a hidden prompt; `what` is the prompt, `name`
    the secret's."""
    from launcher.errors import InputError

    if not sys.stdin.isatty():
        raw = sys.stdin.buffer.read(MAX_SECRET_FILE + 1)  # `< /dev/zero` must not fill the memory
        if len(raw) > MAX_SECRET_FILE:
            raise InputError(f"secret {name!r}: stdin gave more than {MAX_SECRET_FILE >> 20} MiB, more than a secret holds")
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"secret {name!r}: stdin gave bytes that are not UTF-8 text, which no run could use",
                             hint="a secret value is text; binary data can go base64-encoded in a file secret") from None
        value = value[:-1] if value.endswith("\n") else value
    else:
        value = click.prompt(what, hide_input=True)
    if not value:
        raise click.BadParameter(f"{what} is empty")
    return value


def _read_file(path: str, option: str) -> str:
    from launcher.inputs import InputFileError, read_input_file

    try:
        data = read_input_file(path, what="a secret file", max_bytes=MAX_SECRET_FILE)
    except InputFileError as e:
        raise click.BadParameter(f"{path}: {e}", param_hint=option) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise click.BadParameter(f"{path}: is not UTF-8 text", param_hint=option) from None


def _create(cluster: str | None, name: str, kind: str, data: dict[str, str], options: dict[str, str], replace: bool):
    from launcher.errors import InputError
    from launcher.secrets.kinds import MIN_MASK_LEN, Secret, SecretKind, check_mount_path, check_name, check_new

    problem = check_name(name)
    if problem:
        raise InputError(problem)
    if "mount_path" in options:
        problem = check_mount_path(options["mount_path"])
        if problem:
            raise InputError(f"--mount-path: {problem}")
    secret = Secret(name=name, kind=SecretKind(kind), data=data, options=options)
    problem = check_new(secret)  # what no run could use is refused here, not in every run after
    if problem:
        raise InputError(f"secret {name!r}: {problem}")
    store = _store(cluster)
    store.create(secret, replace=replace)
    click.echo(f"{OK} Created {kind} secret {name} in {store.where}")
    for key in secret.too_short_keys():
        what = "its value" if key == "value" else f"its {key}"
        warn(f"{what} is shorter than {MIN_MASK_LEN} characters: too short to be masked in logs")


def _default_name(key: str) -> str:
    return key.lower().replace("_", "-").strip("-")


cluster_opt = click.option("--cluster", help="The cluster profile whose store to use (default: the current one).")
replace_opt = click.option("--replace", is_flag=True, help="Replace a secret of the same name.")
name_opt = click.option("--name", help="The secret's name (default: from the key or file).")


@click.group()
def secret():
    """Create, list and delete secrets."""


@secret.group("create")
def create():
    """Create a secret of a kind."""


@create.command("env")
@click.argument("assignment", metavar="KEY[=VALUE]")
@name_opt
@cluster_opt
@replace_opt
def create_env(assignment, name, cluster, replace):
    """An env var for every run. Omit =VALUE to read it from stdin or a hidden prompt."""
    from launcher.errors import InputError
    from launcher.spec.models import ENV_NAME

    key, sep, value = assignment.partition("=")
    if not ENV_NAME.match(key):
        raise InputError(f"{key!r} is not a valid environment variable name")
    name = name or _default_name(key)
    if not sep:
        value = _read_value(f"value of {key}", name)
    _create(cluster, name, "env", {"value": value}, {"env_key": key}, replace)


@create.command("file")
@click.argument("name")
@click.option("--from", "source", required=True, type=click.Path(dir_okay=False), help="The file to store.")
@click.option("--mount-path", required=True, help="Directory where the run sees it, as <mount-path>/secret.")
@cluster_opt
@replace_opt
def create_file(name, source, mount_path, cluster, replace):
    """A file mounted into every run, with SECRET_PATH_<NAME> pointing at it."""
    _create(cluster, name, "file", {"value": _read_file(source, "--from")}, {"mount_path": mount_path}, replace)


@create.command("databricks")
@click.argument("name", default="databricks")
@click.option("--host", required=True, help="The workspace URL.")
@cluster_opt
@replace_opt
def create_databricks(name, host, cluster, replace):
    """DATABRICKS_HOST and DATABRICKS_TOKEN (the token from stdin or a prompt)."""
    _create(cluster, name, "databricks", {"host": host, "token": _read_value("Databricks token", name)}, {}, replace)


@create.command("hf")
@click.argument("name", default="hf")
@cluster_opt
@replace_opt
def create_hf(name, cluster, replace):
    """HF_TOKEN (from stdin or a prompt)."""
    _create(cluster, name, "hf", {"token": _read_value("Hugging Face token", name)}, {}, replace)


def _key_secret_command(kind: str, doc: str):
    """`secret create ssh|git-ssh NAME --from KEYFILE`: the two differ only in what the run gets."""

    @create.command(kind, help=doc)
    @click.argument("name")
    @click.option("--from", "source", required=True, type=click.Path(dir_okay=False), help="The private key file.")
    @click.option("--mount-path", help="Where the key is mounted (default /secrets/NAME).")
    @cluster_opt
    @replace_opt
    def command(name, source, mount_path, cluster, replace):
        opts = {"mount_path": mount_path} if mount_path else {}
        _create(cluster, name, kind, {"private_key": _read_file(source, "--from")}, opts, replace)

    return command


_key_secret_command("git-ssh", "An SSH key for cloning, with GIT_SSH_COMMAND set.")
_key_secret_command("ssh", "An SSH key file at mode 0400.")


@create.command("s3")
@click.argument("name", default="s3")
@click.option("--credentials", required=True, type=click.Path(dir_okay=False), help="An AWS credentials file.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="An AWS config file.")
@cluster_opt
@replace_opt
def create_s3(name, credentials, config_file, cluster, replace):
    """AWS_SHARED_CREDENTIALS_FILE (and AWS_CONFIG_FILE)."""
    data = {"credentials": _read_file(credentials, "--credentials")}
    if config_file:
        data["config"] = _read_file(config_file, "--config")
    _create(cluster, name, "s3", data, {}, replace)


@create.command("gcp")
@click.argument("name", default="gcp")
@click.option("--from", "source", required=True, type=click.Path(dir_okay=False), help="A service-account JSON key.")
@cluster_opt
@replace_opt
def create_gcp(name, source, cluster, replace):
    """GOOGLE_APPLICATION_CREDENTIALS."""
    _create(cluster, name, "gcp", {"credentials": _read_file(source, "--from")}, {}, replace)


@create.command("docker-registry")
@click.argument("name")
@click.option("--server", required=True)
@click.option("--username", required=True)
@click.option("--email", default="")
@cluster_opt
@replace_opt
def create_docker(name, server, username, email, cluster, replace):
    """Image pull credentials (the password from stdin or a prompt)."""
    import base64
    import json

    password = _read_value("registry password", name)
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    config = {"auths": {server: {"username": username, "password": password, "email": email, "auth": auth}}}
    _create(cluster, name, "docker-registry", {".dockerconfigjson": json.dumps(config)}, {"server": server}, replace)


def list_secrets(cluster: str | None, output: str) -> None:
    from launcher.secrets.kinds import exposed

    store = _store(cluster)
    rows = [{"name": s.name, "kind": s.kind.value, "exposed_as": exposed(s),
             "created_at": s.created_at.isoformat() if s.created_at else None,
             **({"env_key": s.options["env_key"]} if "env_key" in s.options else {}),
             **({"mount_path": s.options["mount_path"]} if "mount_path" in s.options else {})}
            for s in store.list()]
    if output in ("json", "yaml"):
        dump(rows, output)
        return
    if not rows:
        click.echo(f"No secrets in {store.where}.")
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("NAME", "KIND", "EXPOSED AS", "CREATED"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["name"], r["kind"], ", ".join(r["exposed_as"]), (r["created_at"] or "-")[:19].replace("T", " "))
    print_table(table)


@secret.command("list")
@cluster_opt
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
def list_cmd(cluster, output):
    """Names, kinds and dates; never values."""
    list_secrets(cluster, output)


@secret.command("delete")
@click.argument("names", nargs=-1, required=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@cluster_opt
def delete_cmd(names, yes, cluster):
    """Delete secrets."""
    delete_secrets(names, yes, cluster)


def delete_secrets(names, yes: bool, cluster: str | None) -> None:
    from launcher.errors import NotFoundError

    store = _store(cluster)
    known = store.names()  # not list(): a record no run can use must still be deletable
    for n in names:
        if n not in known:  # fail before asking if one does not exist
            raise NotFoundError(f"no secret named {n!r} in {store.where}")
    if not confirm(f"Delete secret(s) {', '.join(names)}?", yes):
        return
    for n in names:
        store.delete(n)
        click.echo(f"{OK} Deleted secret {n}")

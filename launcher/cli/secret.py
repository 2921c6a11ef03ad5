"""`launcher secret create|list|delete`.

Values never come from the command line unless the user puts them there
(`env NAME=VALUE`, mcli's --value, --token, --password, each with a warning): they
are read from a file, from stdin, or from a hidden prompt, so they stay out of shell
history. mcli's shapes (`create secret mounted PATH --name N`, `ssh KEYFILE`) and ours
(`secret create file NAME --from PATH`, `ssh NAME --from KEYFILE`) are one set of
commands. What a secret of each kind holds is launcher.secrets.shapes'.
"""

from __future__ import annotations

import os
import shlex
import sys

import click
from click.shell_completion import CompletionItem

from launcher.cli.common import OK, confirm, dump, print_table, warn
from launcher.errors import InputError, NotFoundError
from launcher.inputs import InputFileError, read_input_file
from launcher.sdk import secrets as sdk
from launcher.sdk.secrets import get_secrets, save_secret
from launcher.secrets.kinds import MIN_MASK_LEN, SecretKind
from launcher.secrets.shapes import (
    DOCKER_HUB,
    databricks_secret,
    docker_registry_secret,
    env_secret,
    file_secret,
    gcp_secret,
    hf_secret,
    key_path_and_name,
    key_secret,
    kinds_named,
    name_from,
    name_from_path,
    oci_secret,
    s3_secret,
    scan_known_hosts,
    split_env_pair,
)

# A Kubernetes Secret holds at most 1 MiB; so does a local one.
MAX_SECRET_FILE = 1 << 20


def _read_value(what: str, name: str, no_input: bool = False) -> str:
    """A secret value from stdin (piped) or a hidden prompt; `what` is the prompt, `name`
    the secret's. With `no_input` there is no prompt: a terminal on stdin is a missing value."""
    if not sys.stdin.isatty():
        raw = sys.stdin.buffer.read(MAX_SECRET_FILE + 1)  # `< /dev/zero` must not fill the memory
        if len(raw) > MAX_SECRET_FILE:
            raise InputError(
                f"secret {name!r}: stdin gave more than {MAX_SECRET_FILE >> 20} MiB, more than a secret holds"
            )
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(
                f"secret {name!r}: stdin gave bytes that are not UTF-8 text, which no run could use",
                hint="a secret value is text; binary data can go base64-encoded in a file secret",
            ) from None
        value = value[:-1] if value.endswith("\n") else value
        if not value and no_input:
            raise InputError(f"--no-input: no {what}: stdin was empty", hint=f"pipe it in: {_stdin_form()}")
    elif no_input:
        raise InputError(f"--no-input: no {what}, and no prompt is shown", hint=f"pipe it in: {_stdin_form()}")
    else:
        value = click.prompt(what, hide_input=True)
    if not value:
        raise click.BadParameter(f"{what} is empty")
    return value


def _stdin_form(drop: tuple[str, ...] = (), swap: dict[str, str] | None = None) -> str:
    """This command as it reads its value from stdin: the words typed after the command's
    name, without the value's flags (`drop`: each a flag taking a value), and with `swap`'s
    words replaced (KEY=VALUE by KEY), behind `printf %s "$VALUE" |`."""
    ctx = click.get_current_context()
    argv = sys.argv[1:]
    typed = argv[argv.index(ctx.info_name) + 1 :] if ctx.info_name in argv else []
    words, skip = [], False
    for word in typed:
        if skip:
            skip = False
            continue
        if word.split("=", 1)[0] in drop:
            skip = "=" not in word
            continue
        words.append((swap or {}).get(word, word))
    return 'printf %s "$VALUE" | ' + " ".join([ctx.command_path, *(shlex.quote(w) for w in words)])


def _value(
    given: str | None, flag: str, what: str, name: str, no_input: bool, *, swap: dict[str, str] | None = None
) -> str:
    """The secret value a flag gave (with a warning that argv shows it), else from stdin or a
    hidden prompt."""
    if given is None:
        return _read_value(what, name, no_input)
    warn(
        f"{flag} puts the value in the process list and your shell history; pipe it instead: "
        f"{_stdin_form((flag,), swap)}"
    )
    if not given:
        raise click.BadParameter(f"{what} is empty", param_hint=flag)
    return given


def _ask(given: str | None, what: str, flag: str, no_input: bool, default: str | None = None) -> str:
    """A setting that is not secret (a path, a key, a host): the flag's, else a prompt on a
    terminal; never a prompt with --no-input, nor when stdin is a pipe (it may carry the value)."""
    if given:
        return given
    if no_input or not sys.stdin.isatty():
        why = "--no-input" if no_input else "stdin is not a terminal"
        raise InputError(f"no {what} ({why}, so nothing is asked)", hint=f"pass {flag}")
    return click.prompt(what, default=default)


def _read_file(path: str, option: str) -> str:
    try:
        data = read_input_file(path, what="a secret file", max_bytes=MAX_SECRET_FILE)
    except InputFileError as e:
        raise click.BadParameter(f"{path}: {e}", param_hint=option) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise click.BadParameter(f"{path}: is not UTF-8 text", param_hint=option) from None


def _one_name(positional: str | None, flag: str | None) -> str | None:
    if positional and flag and positional != flag:
        raise InputError(f"two names: {positional!r} and --name {flag!r}; give one")
    return flag or positional


def _save(cluster: str | None, secret, replace: bool) -> None:
    saved = save_secret(secret, cluster=cluster, replace=replace)
    click.echo(f"{OK} Created {saved.kind} secret {saved.name} in {saved.where}")
    for key in saved.too_short_to_mask:
        what = "its value" if key == "value" else f"its {key}"
        warn(f"{what} is shorter than {MIN_MASK_LEN} characters: too short to be masked in logs")


cluster_opt = click.option("--cluster", help="The cluster profile whose store to use (default: the current one).")
replace_opt = click.option("--replace", is_flag=True, help="Replace a secret of the same name.")
name_opt = click.option("--name", help="The secret's name (default: from the key or file).")
no_input_opt = click.option(
    "--no-input", is_flag=True, help="Never prompt: a value not given (on stdin, or a path by its flag) is an error."
)


def _common(f):
    for option in (replace_opt, cluster_opt, no_input_opt, name_opt):
        f = option(f)
    return f


class KindGroup(click.Group):
    """The kinds, with mcli's other names for some (`environment`, `docker`, `hugging_face`)."""

    ALIASES = {"environment": "env", "docker": "docker-registry", "hugging_face": "hf", "hugging-face": "hf"}

    def get_command(self, ctx, cmd_name):
        return super().get_command(ctx, self.ALIASES.get(cmd_name, cmd_name))

    def format_commands(self, ctx, formatter):
        super().format_commands(ctx, formatter)
        with formatter.section("mcli's names"):
            formatter.write_dl([(alias, f"= {kind}") for alias, kind in self.ALIASES.items()])

    def shell_complete(self, ctx, incomplete):
        return [
            *super().shell_complete(ctx, incomplete),
            *(CompletionItem(a) for a in self.ALIASES if a.startswith(incomplete)),
        ]


@click.group()
def secret():
    """Create, list and delete secrets."""


@secret.group("create", cls=KindGroup)
def create():
    """Create a secret of a kind. Values come from stdin or a hidden prompt; mcli's value
    flags (--value, --token, --password, KEY=VALUE) work too, with a warning that they show
    in the process list.

    \b
    Examples:
      printf %s "$WANDB_API_KEY" | launcher create secret env WANDB_API_KEY
      launcher create secret mounted ./creds.json --name creds --mount-path /secrets/creds
      launcher create secret ssh ~/.ssh/id_ed25519 --name deploy-key
    """


@create.command("env")
@click.argument("assignment", metavar="[KEY[=VALUE]]", required=False)
@click.option("--key", help="The KEY of KEY=VALUE (older mcli's spelling).")
@click.option("--value", help="The VALUE (visible in the process list: prefer stdin).")
@_common
def create_env(assignment, key, value, name, no_input, cluster, replace):
    """An env var for every run. Omit =VALUE to read it from stdin or a hidden prompt."""
    typed = None
    if assignment:
        key_given, typed = split_env_pair(assignment)
        if key and key != key_given:
            raise InputError(f"two keys: {key_given!r} and --key {key!r}; give one")
        key = key_given
    key = _ask(key, "KEY of the variable", "KEY=VALUE, or KEY with the value on stdin", no_input)
    split_env_pair(key)
    if typed is not None and value is not None:
        raise InputError("two values: KEY=VALUE and --value; give one (on stdin, best)")
    name = name or name_from(key)
    if typed is not None:
        value = _value(typed, "KEY=VALUE", f"value of {key}", name, no_input, swap={assignment: key})
    else:
        value = _value(value, "--value", f"value of {key}", name, no_input)
    _save(cluster, env_secret(key, value, name=name), replace)


@create.command("file")
@click.argument("name")
@click.option("--from", "source", required=True, type=click.Path(dir_okay=False), help="The file to store.")
@click.option("--mount-path", required=True, help="Directory where the run sees it, as <mount-path>/secret.")
@cluster_opt
@replace_opt
def create_file(name, source, mount_path, cluster, replace):
    """A file mounted into every run, with SECRET_PATH_<NAME> pointing at it."""
    _save(cluster, file_secret(_read_file(source, "--from"), name=name, mount_path=mount_path), replace)


@create.command("mounted")
@click.argument("path", metavar="[PATH]", required=False)
@click.option("--mount-path", help="Directory where the run sees it, as <mount-path>/secret (default /secrets/NAME).")
@click.option("--value", help="The file's text instead of PATH (visible in the process list: prefer stdin).")
@_common
def create_mounted(path, mount_path, value, name, no_input, cluster, replace):
    """mcli's file secret: PATH's text at <mount-path>/secret, with SECRET_PATH_<NAME>.
    Without PATH the text comes from stdin or a hidden prompt."""
    if path and value is not None:
        raise InputError("two values: PATH and --value; give one")
    name = name or (name_from_path(path) if path else None)
    name = _ask(name, "secret name", "--name", no_input)
    text = _read_file(path, "PATH") if path else _value(value, "--value", "file text", name, no_input)
    _save(cluster, file_secret(text, name=name, mount_path=mount_path), replace)


@create.command("databricks")
@click.argument("positional_name", metavar="[NAME]", required=False)
@click.option("--host", help="The workspace URL.")
@click.option("--token", help="The token (visible in the process list: prefer stdin).")
@_common
def create_databricks(positional_name, host, token, name, no_input, cluster, replace):
    """DATABRICKS_HOST and DATABRICKS_TOKEN (the token from stdin or a prompt)."""
    name = _one_name(positional_name, name) or "databricks"
    host = _ask(host, "Databricks workspace URL", "--host", no_input)
    _save(
        cluster,
        databricks_secret(host, _value(token, "--token", "Databricks token", name, no_input), name=name),
        replace,
    )


@create.command("hf")
@click.argument("positional_name", metavar="[NAME]", required=False)
@click.option("--token", help="The token (visible in the process list: prefer stdin).")
@_common
def create_hf(positional_name, token, name, no_input, cluster, replace):
    """HF_TOKEN (from stdin or a prompt)."""
    name = _one_name(positional_name, name) or "hf"
    _save(cluster, hf_secret(_value(token, "--token", "Hugging Face token", name, no_input), name=name), replace)


def _key_secret_command(kind: str, doc: str):
    """`ssh|git-ssh|sftp-ssh KEYFILE [--name N]` (mcli's) or `NAME --from KEYFILE` (ours): the
    three differ in what the run gets."""
    sftp = kind == "sftp-ssh"

    @click.argument("argument", metavar="[KEYFILE | NAME --from KEYFILE]", required=False)
    @click.option("--from", "source", type=click.Path(dir_okay=False), help="The private key file (ours; NAME first).")
    @click.option("--ssh-private-key", "old_source", type=click.Path(dir_okay=False), hidden=True)
    @click.option("--mount-path", help="Where the key is mounted (default /secrets/NAME).")
    @_common
    def command(
        argument,
        source,
        old_source,
        mount_path,
        name,
        no_input,
        cluster,
        replace,
        host_name=None,
        no_host_check=False,
        known_hosts=None,
    ):

        path, name = key_path_and_name(argument, source or old_source, name)
        path = _ask(path, "private key file", "KEYFILE", no_input)
        if not (source or old_source) and not os.path.lexists(path):
            raise InputError(
                f"no key file {path!r}",
                hint=f"mcli's form is `{kind} KEYFILE [--name NAME]`, ours `{kind} NAME --from KEYFILE`",
            )
        name = name or name_from_path(path)
        hosts = None
        if sftp:
            if known_hosts:
                hosts = _read_file(known_hosts, "--known-hosts")
            else:
                host_name = _ask(host_name, "SFTP server host name", "--host-name (or --known-hosts FILE)", no_input)
                hosts = scan_known_hosts(host_name)
                if no_host_check:
                    warn(
                        "--no-host-check: the host keys were not confirmed; a server pretending to be "
                        f"{host_name} would be trusted"
                    )
                elif no_input or not sys.stdin.isatty():
                    raise InputError(
                        f"the host keys of {host_name} need confirming, and nothing is asked "
                        f"({'--no-input' if no_input else 'stdin is not a terminal'})",
                        hint="check them and pass --known-hosts FILE, or pass --no-host-check",
                    )
                elif not click.confirm(f"Host keys of {host_name}:\n\n{hosts}\nTrust them in the run's known_hosts?"):
                    raise InputError("the host keys were not confirmed; nothing was created")
        key = _read_file(path, "KEYFILE" if not (source or old_source) else "--from")
        _save(cluster, key_secret(SecretKind(kind), key, name=name, mount_path=mount_path, known_hosts=hosts), replace)

    if sftp:
        command = click.option(
            "--known-hosts",
            type=click.Path(dir_okay=False),
            help="The server's host keys as a known_hosts file, instead of scanning --host-name.",
        )(command)
        command = click.option(
            "--no-host-check", is_flag=True, help="Trust the scanned host keys without asking (a security risk)."
        )(command)
        command = click.option("--host-name", help="The SFTP server, whose host keys ssh-keyscan reads.")(command)
    return create.command(kind, help=doc)(command)


_key_secret_command("git-ssh", "An SSH key for cloning, with GIT_SSH_COMMAND set.")
_key_secret_command("ssh", "An SSH key file at mode 0400.")
_key_secret_command(
    "sftp-ssh",
    "An SSH key and the server's host keys for SFTP (COMPOSER_SFTP_KEY_FILE, COMPOSER_SFTP_KNOWN_HOSTS_FILE).",
)


def _mount_opts(f):
    f = click.option(
        "--mount-path",
        "--mount-directory",
        "mount_path",
        help="Directory where the run sees the files (default /secrets/NAME).",
    )(f)
    return f


@create.command("s3")
@click.argument("positional_name", metavar="[NAME]", required=False)
@click.option(
    "--credentials",
    "--credentials-file",
    "credentials",
    type=click.Path(dir_okay=False),
    help="An AWS credentials file (~/.aws/credentials).",
)
@click.option(
    "--config",
    "--config-file",
    "config_file",
    type=click.Path(dir_okay=False),
    help="An AWS config file (~/.aws/config).",
)
@click.option("--profile", help="The profile the run uses (AWS_PROFILE).")
@_mount_opts
@_common
def create_s3(positional_name, credentials, config_file, profile, mount_path, name, no_input, cluster, replace):
    """AWS_SHARED_CREDENTIALS_FILE (and AWS_CONFIG_FILE)."""
    name = _one_name(positional_name, name) or "s3"
    credentials = _ask(credentials, "AWS credentials file", "--credentials-file", no_input)
    data = _read_file(credentials, "--credentials-file")
    config = _read_file(config_file, "--config-file") if config_file else None
    _save(cluster, s3_secret(data, config=config, name=name, mount_path=mount_path, profile=profile), replace)


@create.command("gcp")
@click.argument("positional_name", metavar="[NAME]", required=False)
@click.option(
    "--from", "--credentials-file", "source", type=click.Path(dir_okay=False), help="A service-account JSON key."
)
@_mount_opts
@_common
def create_gcp(positional_name, source, mount_path, name, no_input, cluster, replace):
    """GOOGLE_APPLICATION_CREDENTIALS."""
    name = _one_name(positional_name, name) or "gcp"
    source = _ask(source, "GCP credentials file", "--credentials-file", no_input)
    _save(cluster, gcp_secret(_read_file(source, "--credentials-file"), name=name, mount_path=mount_path), replace)


@create.command("oci")
@click.argument("positional_name", metavar="[NAME]", required=False)
@click.option("--config-file", type=click.Path(dir_okay=False), help="Your OCI config file (~/.oci/config).")
@click.option("--key-file", type=click.Path(dir_okay=False), help="Your OCI API signing key (~/.oci/oci_api_key.pem).")
@_mount_opts
@_common
def create_oci(positional_name, config_file, key_file, mount_path, name, no_input, cluster, replace):
    """OCI_CLI_CONFIG_FILE and OCI_CLI_KEY_FILE; the config's key_file points at the mounted key."""
    name = _one_name(positional_name, name) or "oci"
    config_file = _ask(config_file, "OCI config file", "--config-file", no_input)
    key_file = _ask(key_file, "OCI API key file", "--key-file", no_input)
    _save(
        cluster,
        oci_secret(
            _read_file(config_file, "--config-file"),
            _read_file(key_file, "--key-file"),
            name=name,
            mount_path=mount_path,
        ),
        replace,
    )


@create.command("docker-registry")
@click.argument("positional_name", metavar="[NAME]", required=False)
@click.option("--server", help="The registry's URL (Docker Hub: https://index.docker.io/v1/).")
@click.option("--username")
@click.option("--password", help="The password or token (visible in the process list: prefer stdin).")
@click.option("--email", default="")
@_common
def create_docker(positional_name, server, username, password, email, name, no_input, cluster, replace):
    """Image pull credentials (the password from stdin or a prompt)."""
    name = _ask(_one_name(positional_name, name), "secret name", "NAME or --name", no_input)
    server = _ask(server, "registry URL", "--server", no_input, default=DOCKER_HUB)
    username = _ask(username, "registry username", "--username", no_input)
    password = _value(password, "--password", "registry password", name, no_input)
    _save(
        cluster,
        docker_registry_secret(name=name, server=server, username=username, password=password, email=email),
        replace,
    )


type_opt = click.option(
    "--type",
    "types",
    multiple=True,
    metavar="KIND",
    help="Only secrets of this kind (repeatable; mcli's names too: environment, mounted, ...; all: every kind).",
)
ids_opt = click.option(
    "--ids",
    "include_ids",
    is_flag=True,
    help="Add each secret's id (mcli's flag): a secret's id here is its name, in its cluster's store.",
)
all_opt = click.option(
    "-a", "--all", "all_", is_flag=True, help="Every secret of the store (the confirmation counts them)."
)
LIST_FORMATS = click.Choice(["table", "name", "json", "yaml"])


def list_secrets(cluster: str | None, output: str, types: tuple[str, ...] = (), *, include_ids: bool = False) -> None:
    types = tuple(t for t in types if t.lower() != "all")  # mcli's default, `--type all`: every kind
    secrets = get_secrets(cluster=cluster, kinds=types)
    rows = [
        {
            **({"id": s.name} if include_ids else {}),
            "name": s.name,
            "kind": s.kind,
            "exposed_as": s.exposed_as,
            "created_at": s.created_at.isoformat() if s.created_at else None,
            **{k: s.options[k] for k in ("env_key", "mount_path") if k in s.options},
        }
        for s in secrets
    ]
    if output == "name":
        for r in rows:
            click.echo(r["name"])
        return
    if output in ("json", "yaml"):
        dump(rows, output)
        return
    if not rows:
        of = f" of kind {', '.join(sorted(k.value for k in kinds_named(types)))}" if types else ""
        click.echo(f"No secrets{of} in {secrets.where}.")
        return
    from rich.table import Table  # lazy: rich costs 3x `python -c pass`, for tables only

    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("NAME", *(["ID"] if include_ids else []), "KIND", "EXPOSED AS", "CREATED"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["name"],
            *([r["id"]] if include_ids else []),
            r["kind"],
            ", ".join(r["exposed_as"]),
            (r["created_at"] or "-")[:19].replace("T", " "),
        )
    print_table(table)


@secret.command("list")
@cluster_opt
@type_opt
@ids_opt
@click.option("-o", "--output", type=LIST_FORMATS, default="table", show_default=True)
def list_cmd(cluster, types, include_ids, output):
    """Names, kinds and dates; never values."""
    list_secrets(cluster, output, types, include_ids=include_ids)


@secret.command("bundle")
@click.argument("run")
@click.argument("names", nargs=-1)
@cluster_opt
def bundle_cmd(run, names, cluster):
    """Create RUN's own Secret from the stored secrets NAMES (none given: all of them), for
    the manifests of `launcher run --dry-run` applied with kubectl: their pods take the run's
    secrets from it and cannot start without it. Never prints a value.

    \b
    Examples:
      launcher run -f spec.yaml --cluster prod --dry-run -o yaml > run.yaml   # names the command
      launcher secret bundle hello-ab12cd hf-token --cluster prod
      kubectl apply -f run.yaml
    """
    where, left_out = sdk.bundle_secrets(run, names or None, cluster=cluster)
    for name in left_out:
        warn(
            f"secret {name} is a docker-registry secret: no Secret a pod reads can carry it; "
            f"add `imagePullSecrets: [{{name: {name}}}]` to the pod template before applying"
        )
    click.echo(f"{OK} Run {run}'s Secret created in {where}.")


@secret.command("delete")
@click.argument("names", nargs=-1)
@all_opt
@click.option("-y", "--yes", "--force", "yes", is_flag=True, help="Do not ask for confirmation (mcli's --force).")
@cluster_opt
def delete_cmd(names, all_, yes, cluster):
    """Delete secrets by NAME or glob ('hf-*'), or all of them with -a."""
    delete_secrets(names, yes, cluster, all_=all_)


GLOB_CHARS = frozenset("*?[")


def matching_secrets(names: tuple[str, ...] | list[str], known: list[str], where: str) -> list[str]:
    """The secrets NAMES mean, in order, each once: a name as it is, a glob ('hf-*') every
    secret it matches; one that is not there, or a glob that matches none, is NotFoundError."""
    from fnmatch import fnmatchcase

    chosen: dict[str, None] = {}
    for n in names:
        if GLOB_CHARS & set(n):
            matched = [k for k in known if fnmatchcase(k, n)]
            if not matched:
                raise NotFoundError(f"no secret in {where} matches {n!r}", hint=_known_hint(known))
            chosen.update(dict.fromkeys(matched))
        elif n in known:
            chosen[n] = None
        else:
            raise NotFoundError(f"no secret named {n!r} in {where}", hint=_known_hint(known, n))
    return list(chosen)


def _known_hint(known: list[str], name: str | None = None) -> str:
    import difflib

    guess = difflib.get_close_matches(name, known, n=1) if name else []
    if guess:
        return f"did you mean {guess[0]!r}?"
    return f"the secrets there: {', '.join(known)}" if known else "there are no secrets there"


def delete_secrets(names, yes: bool, cluster: str | None, *, all_: bool = False) -> None:
    if all_ and names:
        raise click.UsageError("give secret NAMEs or -a/--all, not both")
    if not all_ and not names:
        raise click.UsageError("give the NAMEs (or globs) of the secrets to delete, or -a/--all for every one")
    known = sdk.get_secret_names(cluster=cluster)  # a record no run can use must still be deletable
    if all_:
        if not known:
            click.echo(f"No secrets in {known.where}.")
            return
        if not confirm(f"Delete all {len(known)} secret(s) in {known.where} ({', '.join(known)})?", yes):
            return
        names, yes = list(known), True
    names = matching_secrets(names, list(known), known.where)  # fail before asking if one does not exist
    if not confirm(f"Delete secret(s) {', '.join(names)}?", yes):
        return
    for n in sdk.delete_secrets(names, cluster=cluster):
        click.echo(f"{OK} Deleted secret {n}")

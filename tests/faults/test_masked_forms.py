"""Issue 36, items 2 and 4, on the local backend, as a user sees them.

Item 2: a secret value printed in any of the forms programs print a string in (shell- and
Python-quoted, JSON-escaped, URL-encoded, base64) and every field of a credentials or config
file secret (AWS INI with `:`, YAML, JSON, .env, INI) shows as **** in `launcher logs` and in
the followed output, never in clear. Each form is one real run whose command prints it.

Item 4: a run cannot read the local secret store: a `secrets: []` run that cats or opens
the store's file, lists its directory or greps the launcher home finds nothing, while the
`launcher` commands it may call still work (and see an empty store).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from launcher.secrets.store import LocalSecretStore

# Every character that a quoting form escapes: ' " $ \, a space, a non-ASCII letter, and
# what a URL encodes (/ + @ %).
VALUE = "p'a\"s$s\\wörd/+@%x 9"


def py(code: str) -> str:
    """A bash line running Python `code` with V, the env secret's value."""
    return f"""python -c 'import os; V = os.environ["DB_PASSWORD"]; {code}'"""


# form -> (the command, the line the log must show). The line as the command prints it is
# what bash prints on this machine with the value in its environment (`printed`).
ENV_FORMS = {
    "as-is": ('echo "plain: $DB_PASSWORD"', "plain: ****"),
    "set -x": ('set -x; : "$DB_PASSWORD"', "+ : '****'"),
    "declare -p": ("declare -p DB_PASSWORD", 'declare -x DB_PASSWORD="****"'),
    "printf %q": ("printf 'q: %q\\n' \"$DB_PASSWORD\"", "q: ****"),
    "printf %q in the C locale": ("LC_ALL=C printf 'q: %q\\n' \"$DB_PASSWORD\"", "q: $'****'"),
    "repr()": (py('print("repr:", repr(V))'), "repr: '****'"),
    "ascii()": (py('print("ascii:", ascii(V))'), "ascii: '****'"),
    "shlex.quote": (py('import shlex; print("shlex:", shlex.quote(V))'), "shlex: '****'"),
    "json.dumps": (py('import json; print("json:", json.dumps(V))'), 'json: "****"'),
    "urllib.parse.quote": (py('from urllib.parse import quote; print("url:", quote(V, safe=""))'), "url: ****"),
    "urllib.parse.quote_plus": (py('from urllib.parse import quote_plus as q; print("url:", q(V))'), "url: ****"),
    "a URL-encoded password in a connection string": (
        py('from urllib.parse import quote; print("dsn: postgresql://app:" + quote(V) + "@db:5432/x")'),
        "dsn: postgresql://app:****@db:5432/x",
    ),
    "base64": ('printf %s "$DB_PASSWORD" | base64 -w0; echo', "****"),
    "base64 of a line (echo | base64)": ('echo "$DB_PASSWORD" | base64', "****"),
}


def printed(command: str) -> str:
    """What `command` prints here, unmasked, with the secret's value in its environment."""
    # `python` as a run finds it: the launcher's interpreter first on PATH (a bare Debian has
    # only python3; the suite may run as .venv/bin/pytest without the venv on PATH).
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "DB_PASSWORD": VALUE, "LC_ALL": "C.UTF-8"}
    done = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return (done.stdout + done.stderr).strip()


def spec_text(name: str, lines: list[str], secrets: list[str] | None = None) -> str:
    body = f"name: {name}\n"
    if secrets is not None:
        body += f"secrets: {json.dumps(secrets)}\n"
    # A fixed UTF-8 locale: bash's quoting of a non-ASCII letter depends on it.
    return body + "command: |\n  export LC_ALL=C.UTF-8\n" + "".join(f"  {line}\n" for line in lines) + "  echo done\n"


def run_and_read(cli, name: str, lines: list[str], secrets: list[str] | None = None) -> list[tuple[str, str]]:
    """(where, text) of what a user sees of the run: its followed output and `launcher logs`."""
    r = cli("run", "-f", str(cli.spec(name, spec_text(name, lines, secrets))), "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    logs = cli("logs", name)
    assert logs.returncode == 0, logs.stderr
    return [("run --follow", r.stdout + r.stderr), ("launcher logs", logs.stdout)]


@pytest.mark.parametrize("form", list(ENV_FORMS))
def test_item2_an_env_secret_printed_in_each_form_is_masked(cli, form):
    command, shown = ENV_FORMS[form]
    clear = printed(command)
    assert VALUE not in clear or form == "as-is"  # the form is not the value itself
    assert cli("secret", "create", "env", "DB_PASSWORD", input=VALUE).returncode == 0
    name = "form-" + uuid.uuid4().hex[:8]
    for where, text in run_and_read(cli, name, [command]):
        lines = text.splitlines()
        assert "done" in lines, f"{where}: {text}"
        assert shown in lines, f"{where} does not show {shown!r}: {text}"
        assert VALUE not in text and clear not in text, f"{where} holds the value ({form}): {text}"


AWS_ID = "AKIAFORMSTEST1234567"
AWS_KEY = "colon/Secret+Key0123456789abcdEFGH"
YAML_PASSWORD = "yaml-pa$$word 'quoted'"
JSON_TOKEN = "json-field-token-7731"
DOTENV_KEY = "dotenv-key-value-42"
DOTENV_OTHER = "plain-dotenv-value-43"
INI_PASSWORD = "ini-pass-value-991"
INI_USER = "ini-user-value-992"


def file_secret(cli, name: str, text: str) -> None:
    (cli.cwd / name).write_text(text)
    r = cli("secret", "create", "file", name, "--from", name, "--mount-path", f"/secrets/{name}")
    assert r.returncode == 0, r.stderr


def create_aws(cli) -> None:
    (cli.cwd / "credentials").write_text(
        f"[default]\naws_access_key_id: {AWS_ID}\naws_secret_access_key:{AWS_KEY}\n"
    )  # botocore reads `:` as it reads `=`
    r = cli("secret", "create", "s3", "--credentials", "credentials")
    assert r.returncode == 0, r.stderr


def create_yaml(cli) -> None:
    file_secret(
        cli,
        "dbconf",
        f'db:\n  host: db.internal.example\n  password: "{YAML_PASSWORD}"\n  port: 5432\n  tls: true\n',
    )


def create_json(cli) -> None:
    file_secret(cli, "svc", json.dumps({"service": {"url": "https://svc.example", "token": JSON_TOKEN}}, indent=2))


def create_dotenv(cli) -> None:
    file_secret(cli, "dotenv", f'API_KEY="{DOTENV_KEY}"\nexport OTHER_KEY={DOTENV_OTHER}\n')


def create_ini(cli) -> None:
    file_secret(cli, "inifile", f"[server]\npassword = {INI_PASSWORD}\nuser: {INI_USER}\n")


READ_INI = "import configparser, os; c = configparser.ConfigParser(); c.read(os.environ[{var!r}]); "
# form -> (how the secret is made, the command, the line the log must show, the values).
FILE_FORMS = {
    "AWS credentials written with ':'": (
        create_aws,
        "python -c '"
        + READ_INI.format(var="AWS_SHARED_CREDENTIALS_FILE").replace("'", '"')
        + 'd = c["default"]; print("aws:", d["aws_access_key_id"], d["aws_secret_access_key"])\'',
        "aws: **** ****",
        [AWS_ID, AWS_KEY],
    ),
    "a YAML file's field": (
        create_yaml,
        'python -c \'import os, yaml; d = yaml.safe_load(open(os.environ["SECRET_PATH_DBCONF"]))["db"]; '
        'print("yaml:", d["password"], "port", d["port"], "tls", d["tls"])\'',
        "yaml: **** port 5432 tls True",  # a port and a boolean are no secret: left as they are
        [YAML_PASSWORD],
    ),
    "a JSON file's field": (
        create_json,
        'python -c \'import json, os; d = json.load(open(os.environ["SECRET_PATH_SVC"])); '
        'print("json field:", d["service"]["token"])\'',
        "json field: ****",
        [JSON_TOKEN],
    ),
    "a .env file's fields": (
        create_dotenv,
        'set -a; . "$SECRET_PATH_DOTENV"; set +a; echo "dotenv: $API_KEY $OTHER_KEY"',
        "dotenv: **** ****",
        [DOTENV_KEY, DOTENV_OTHER],
    ),
    "an INI file's fields (= and :)": (
        create_ini,
        "python -c '"
        + READ_INI.format(var="SECRET_PATH_INIFILE").replace("'", '"')
        + 'print("ini:", c["server"]["password"], c["server"]["user"])\'',
        "ini: **** ****",
        [INI_PASSWORD, INI_USER],
    ),
}


@pytest.mark.parametrize("form", list(FILE_FORMS))
def test_item2_each_field_of_a_file_secret_printed_by_the_run_is_masked(cli, form):
    create, command, shown, values = FILE_FORMS[form]
    create(cli)
    name = "field-" + uuid.uuid4().hex[:8]
    for where, text in run_and_read(cli, name, [command]):
        assert "done" in text.splitlines(), f"{where}: {text}"
        assert shown in text.splitlines(), f"{where} does not show {shown!r}: {text}"
        leaked = [v for v in values if v in text]
        assert leaked == [], f"{where} holds {leaked} ({form}): {text}"


# ---------------------------------------------------------------- item 4

STORED = "stored-only-" + uuid.uuid4().hex  # never given to the run
# The run looks for the value by its reverse: the spec (which the run may read) never holds it.
PEEK = [
    'store="$LAUNCHER_HOME/secrets/secrets.json"',
    'cat "$store"; echo "cat: $?"',
    'cat "$LAUNCHER_HOME/secrets.json"; echo "cat the old place: $?"',
    """python -c 'import os; print(open(os.environ["LAUNCHER_HOME"] + "/secrets/secrets.json").read())'; """
    'echo "open: $?"',
    'echo "listed: [$(ls -A "$LAUNCHER_HOME/secrets")]"',
    f'grep -rls -- "$(echo {STORED[::-1]} | rev)" "$LAUNCHER_HOME" /proc/self/environ; echo "grep: $?"',
    "launcher secret list",
    "launcher get runs",
]


def test_item4_a_run_given_no_secrets_cannot_read_the_store(cli):
    assert cli("secret", "create", "env", "STORED_TOKEN", input=STORED).returncode == 0
    file_secret(cli, "inifile", f"[server]\npassword = {INI_PASSWORD}\n")
    store = LocalSecretStore(cli.home).path
    assert STORED in store.read_text()  # the store holds it, and this user can read it
    for where, text in run_and_read(cli, "peek", PEEK, secrets=[]):
        lines = text.splitlines()
        assert STORED not in text and INI_PASSWORD not in text, f"{where} holds a stored value: {text}"
        assert "cat: 1" in lines and "open: 1" in lines, f"{where}: {text}"
        assert "listed: []" in lines and "grep: 1" in lines, f"{where}: {text}"
        # The launcher commands a run may call work, and see no secret.
        assert any("No secrets in the local secret store" in line for line in lines), f"{where}: {text}"
        assert any(line.startswith("peek-") and "RUNNING" in line for line in lines), f"{where}: {text}"
        assert "[launcher] private mount namespace" in text or "hidden from the run" in text
    assert STORED in store.read_text()  # nothing of it was lost


def test_item4_a_run_gets_its_own_secret_and_not_the_store_even_through_exec(cli):
    assert cli("secret", "create", "env", "STORED_TOKEN", input=STORED).returncode == 0
    assert cli("secret", "create", "env", "GIVEN_TOKEN", input="given-token-value-5521").returncode == 0
    spec = cli.spec(
        "given",
        spec_text("given", ['echo "given: $GIVEN_TOKEN stored: ${STORED_TOKEN:-none}"', "sleep 60"], ["given-token"]),
    )
    assert cli("run", "-f", str(spec)).returncode == 0
    try:
        cli.wait_status("given", {"RUNNING"})
        store = str(LocalSecretStore(cli.home).path)
        r = cli("exec", "given", "--", "cat", store)
        assert r.returncode != 0 and STORED not in r.stdout + r.stderr, (r.stdout, r.stderr)
        assert "No such file or directory" in r.stderr
        r = cli("exec", "given", "--", "printenv", "GIVEN_TOKEN")  # what it was given, it has
        assert r.returncode == 0 and r.stdout.strip() == "given-token-value-5521"
    finally:
        cli("stop", "given")
    logs = cli("logs", "given").stdout
    assert "given: **** stored: none" in logs and STORED not in logs, logs


PEEK_QUIETLY = ['cat "$LAUNCHER_HOME/secrets/secrets.json"; echo "cat: $?"']


def test_item4_a_run_whose_paths_are_rewritten_still_has_the_store_hidden(cli, tmp_path):
    """A file secret whose mount point cannot be made (it lies under a file) sends the run to
    the rewritten paths; the rank still enters a namespace of its own, for the cover alone."""
    assert cli("secret", "create", "env", "STORED_TOKEN", input=STORED).returncode == 0
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    (cli.cwd / "cred").write_text("rewritten-file-secret-value\n")
    r = cli("secret", "create", "file", "cred", "--from", "cred", "--mount-path", f"{blocker}/cred")
    assert r.returncode == 0, r.stderr
    lines = [*PEEK_QUIETLY, 'cat "$SECRET_PATH_CRED"']
    for where, text in run_and_read(cli, "rewritten", lines, secrets=["cred"]):
        assert STORED not in text and "cat: 1" in text.splitlines(), f"{where}: {text}"
        assert "****" in text.splitlines(), f"{where}: {text}"  # its own secret, read and masked
        note = next(line for line in text.splitlines() if "no private mount namespace here" in line)
        assert f"hidden from the run: {cli.home / 'secrets'}" in note, note


def test_item4_where_no_namespace_is_had_the_log_says_the_store_is_readable(cli):
    assert cli("secret", "create", "env", "STORED_TOKEN", input=STORED).returncode == 0
    cli.env["LAUNCHER_LOCAL_MOUNTS"] = "rewrite"
    for where, text in run_and_read(cli, "open", PEEK_QUIETLY, secrets=[]):
        assert "the secret store is NOT hidden from the run (LAUNCHER_LOCAL_MOUNTS=rewrite)" in text, f"{where}: {text}"


def test_item4_a_run_of_an_unprivileged_user_cannot_unmount_the_cover(cli):
    """As any user but root, the rank's command holds no capability in its namespace: it
    cannot unmount the cover, nor in a user namespace it makes itself (the mounts are
    locked there). The launcher runs as uid 1000 in a user namespace of this test's."""
    as_user = ["unshare", "--user", "--map-user=1000", "--map-group=1000"]
    probe = subprocess.run([*as_user, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no user namespace here: {probe.stderr.decode().strip()}")
    assert cli("secret", "create", "env", "STORED_TOKEN", input=STORED).returncode == 0
    lines = [
        'umount "$LAUNCHER_HOME/secrets"; echo "umount: $?"',
        """unshare -Urm sh -c 'umount "$LAUNCHER_HOME/secrets"; cat "$LAUNCHER_HOME/secrets/secrets.json"'; """
        'echo "nested: $?"',
        *PEEK_QUIETLY,
        "id -u",
    ]
    spec = cli.spec("unpriv", spec_text("unpriv", lines, []))
    r = subprocess.run(
        [*as_user, sys.executable, "-m", "launcher", "run", "-f", str(spec), "--follow"],
        cwd=cli.cwd,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines_seen = r.stdout.splitlines()
    assert "1000" in lines_seen and "cat: 1" in lines_seen, r.stdout
    assert "umount: 0" not in lines_seen and "nested: 0" not in lines_seen, r.stdout
    assert STORED not in r.stdout + r.stderr

"""Items 1 and 2 of the hardening issue: secret values in logs. The sweep reads every
file under $LAUNCHER_HOME (and the fake cluster's pod logs), byte for byte: masking
when `launcher logs` reads is no defence, a value must never be written."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from tests.conftest import wait_until
from tests.faults.conftest import describe
from tests.forked_cli import launcher_command

MULTI = "first-line-of-secret-A1\nsecond-line-of-secret-B2\nthird-C3"
B64 = base64.b64encode(b"\xfb\xff\xbe binary credential \x00\x01").decode()  # has + / = in it
STDERR_ONLY = "only-on-stderr-value-9"
SHORT = "x7q"

# The command prints each value in ways a line-by-line masker misses: whole (spanning
# lines), byte by byte with a flush after each, inside a longer line, and on stderr.
COMMAND = r"""
echo "multi: $MULTI_SECRET"
python - <<'EOF'
import os, sys, time
for name in ("MULTI_SECRET", "B64_SECRET"):
    for ch in os.environ[name]:
        sys.stdout.write(ch); sys.stdout.flush()
    print(flush=True)
sys.stdout.write("x" * 65530 + os.environ["B64_SECRET"] + "\n")  # across the pipe's first read
print(os.environ["STDERR_SECRET"], file=sys.stderr, flush=True)
print("prefix" + os.environ["MULTI_SECRET"].splitlines()[1] + "suffix", flush=True)
EOF
echo "short: $SHORT_SECRET"
echo done
"""


def sweep(root: Path, values: list[str]) -> list[str]:
    """'relative/path: value' for every file under root holding a value."""
    hits = []
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            path = Path(dirpath) / f
            try:
                data = path.read_bytes()
            except OSError:
                continue
            for v in values:
                if v.encode() in data:
                    hits.append(f"{path.relative_to(root)}: {v[:12]}")
    return hits


def secret_lines() -> list[str]:
    return [MULTI, *MULTI.splitlines(), B64, STDERR_ONLY]


def test_item1_multiline_base64_and_stderr_values_never_reach_a_file(cli):
    for key, value in (("MULTI_SECRET", MULTI), ("B64_SECRET", B64), ("STDERR_SECRET", STDERR_ONLY)):
        assert cli("secret", "create", "env", key, input=value).returncode == 0
    spec = cli.spec("leak", "name: leaky\ncommand: |\n" + "".join(f"  {line}\n" for line in COMMAND.splitlines()))
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    logs = cli("logs").stdout
    assert "done" in logs and logs.count("****") >= 6, logs
    assert "prefix****suffix" in logs  # one line of the multi-line value, inside a longer line
    hits = sweep(cli.home, secret_lines())
    assert [h for h in hits if not h.startswith("secrets/secrets.json: ")] == []
    assert len(hits) >= 3  # the sweep does see the store (mode 0600), so it would see a leak
    for out in (r.stdout, r.stderr, logs):
        assert not any(v in out for v in secret_lines())


def test_item2_a_short_secret_is_warned_about_at_create_and_in_the_run_log(cli):
    r = cli("secret", "create", "env", "SHORT_SECRET", input=SHORT)
    assert r.returncode == 0
    assert "too short to be masked in logs" in r.stderr
    spec = cli.spec("short", 'name: short\ncommand: |\n  echo "short: $SHORT_SECRET"\n')
    assert cli("run", "-f", str(spec), "--follow").returncode == 0
    logs = cli("logs").stdout
    assert "secret(s) SHORT_SECRET are shorter than 4 characters: too short to be masked in logs" in logs
    # A public field of a kind is not masked either: the workspace a run talks to.
    assert (
        cli(
            "secret",
            "create",
            "databricks",
            "--host",
            "https://dbc-public.example.com",
            input="dapi-not-public-token-1",
        ).returncode
        == 0
    )
    spec = cli.spec("host", 'name: host\ncommand: |\n  echo "$DATABRICKS_HOST $DATABRICKS_TOKEN"\n')
    assert cli("run", "-f", str(spec), "--follow").returncode == 0
    assert "https://dbc-public.example.com ****" in cli("logs").stdout
    assert describe(cli)["status"] == "COMPLETED"


def test_item1_pod_logs_of_the_fake_cluster_hold_no_value(fake_kube, launcher_home, tmp_path):
    """The same entrypoint runs in a pod: what the kubelet would keep is already masked."""
    import subprocess

    env = {**os.environ, "LAUNCHER_HOME": str(launcher_home)}

    def run(*a, **kw):
        return subprocess.run(
            [*launcher_command(env), *a],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            **kw,
        )

    assert run("secret", "create", "env", "MULTI_SECRET", "--cluster", "fake", input=MULTI).returncode == 0
    spec = tmp_path / "pod.yaml"
    spec.write_text(
        'name: podleak\nimage: python:3.11\ncommand: |\n  echo "$MULTI_SECRET"\n'
        '  python -c "import os,sys; [sys.stdout.write(c) or sys.stdout.flush() '
        "for c in os.environ['MULTI_SECRET']]\"\n  echo end\n"
    )
    r = run("run", "-f", str(spec), "--cluster", "fake", "--follow")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: fake_kube.containers, 30, message="the fake cluster to have run the pod's container")
    pod_logs = "\n".join(text for c in fake_kube.containers.values() for _, text in c.lines)
    assert "end" in pod_logs and "****" in pod_logs, pod_logs
    assert not any(v in pod_logs for v in [MULTI, *MULTI.splitlines()])
    assert not any(v in r.stdout + r.stderr for v in [MULTI, *MULTI.splitlines()])

"""`launcher exec`, `connect`, `interactive` and `port-forward` on the local backend, through
the real CLI: a shell on a pseudo-terminal (pexpect), a command in a rank's mount namespace
with its environment and secrets, exit codes, and a forwarded HTTP server. Every run is
capped (a small max_duration) and stopped at the end."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.request

import pexpect
import pytest

from tests.conftest import wait_until

SECRET = "exec-s3cret-Value-5531"
SHELL_UP = 60  # seconds for a run to start and a shell to answer, on a loaded machine


def submitted(out: str) -> str:
    m = re.search(r"[Rr]un (\S+) submitted", out)
    assert m, out
    return m.group(1)


@pytest.fixture
def runs(cli):
    """Names of the runs a test started, stopped at its end."""
    started: list[str] = []
    yield started
    for name in started:
        cli("stop", "run", "-y", name)


def spawn(cli, *args: str) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-m", "launcher", *args],
        cwd=str(cli.cwd),
        env={**cli.env, "SHELL": "/bin/bash", "PS1": "$ ", "TERM": "xterm"},
        encoding="utf-8",
        timeout=SHELL_UP,
        dimensions=(40, 200),
    )


def echo_rank(shell: pexpect.spawn) -> str:
    """The run name and node rank the shell's environment has."""
    shell.sendline("echo $RUN_NAME $NODE_RANK")
    shell.expect(r"(interactive-[a-z0-9]+) (\d+)\r\n")  # the typed line has $RUN_NAME, not a name
    return f"{shell.match.group(1)} {shell.match.group(2)}"


def test_interactive_opens_a_shell_in_rank_0_and_connect_gets_back_in(cli, runs):
    shell = spawn(cli, "interactive", "--max-duration", "3m")
    shell.expect(r"[Ii]nteractive run (\S+) submitted")
    name = shell.match.group(1)
    runs.append(name)
    assert echo_rank(shell) == f"{name} 0"
    shell.sendline("exit 0")
    shell.expect(pexpect.EOF)
    shell.wait()
    assert shell.exitstatus == 0
    assert cli.describe(name)["status"] == "RUNNING"  # leaving the shell leaves the run

    # A dropped connection: the client dies; the run goes on and connect gets back in.
    dropped = spawn(cli, "connect", name)
    assert echo_rank(dropped) == f"{name} 0"
    dropped.kill(9)
    dropped.close(force=True)
    assert cli.describe(name)["status"] == "RUNNING"
    again = spawn(cli, "connect", name)
    assert echo_rank(again) == f"{name} 0"
    again.sendline("tty; exit 5")
    again.expect(r"/dev/pts/\d+")  # a terminal, since connect's stdin is one
    again.expect(pexpect.EOF)
    again.wait()
    assert again.exitstatus == 5


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed here")
def test_interactive_tmux_keeps_the_session_across_a_dropped_connection(cli, runs):
    shell = spawn(cli, "interactive", "--max-duration", "3m", "--tmux")
    shell.expect(r"[Ii]nteractive run (\S+) submitted")
    runs.append(shell.match.group(1))
    shell.sendline('export MARK=kept-4417; echo "in-tmux:${TMUX:+yes}"')
    shell.expect("in-tmux:yes")
    shell.kill(9)
    shell.close(force=True)
    again = spawn(cli, "connect", runs[0], "--tmux")
    again.sendline('echo "mark:$MARK"')
    again.expect("mark:kept-4417")  # the same tmux session, its shell's variable still set
    again.sendline("exit")
    again.expect(pexpect.EOF)


def test_interactive_from_a_spec_keeps_its_environment_and_replaces_its_command(cli, runs):
    spec = cli.spec(
        "dev",
        """\
        name: devbox
        command: echo this command is replaced; exit 9
        env_variables: {FROM_SPEC: kept-2291}
        """,
    )
    shell = spawn(cli, "interactive", "-f", str(spec), "--max-duration", "90s")
    shell.expect(r"[Ii]nteractive run (devbox-\S+) submitted")
    name = shell.match.group(1)
    runs.append(name)
    shell.sendline('echo "spec:$FROM_SPEC"')
    shell.expect("spec:kept-2291")
    shell.sendline("exit")
    shell.expect(pexpect.EOF)
    record = cli.describe(name)
    assert record["status"] == "RUNNING"
    assert record["spec"]["scheduling"]["max_duration"] == pytest.approx(90 / 3600)
    assert "sleep 90" in record["spec"]["command"]


JOB_CONTROL_NOISE = ("cannot set terminal process group", "no job control in this shell")


def test_interactive_and_connect_with_piped_commands_print_their_output_and_no_shell_noise(cli, runs):
    cli.env["SHELL"] = "/bin/bash"  # the shell that, run interactively without a terminal, is noisy
    r = cli("interactive", "--max-duration", "3m", input='echo "piped into rank $NODE_RANK"\nexit 4\n')
    runs.append(submitted(r.stderr))
    assert r.returncode == 4, r.stderr  # the shell's exit code
    assert r.stdout == "piped into rank 0\n"  # the commands' output, no prompt, no echoed command
    assert not any(noise in r.stderr for noise in JOB_CONTROL_NOISE), r.stderr
    assert all(line.startswith(("✔", "i ")) for line in r.stderr.splitlines()), r.stderr  # only launcher's own

    r = cli("connect", runs[0], input="echo $RUN_NAME\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{runs[0]}\n"
    assert not any(noise in r.stderr for noise in JOB_CONTROL_NOISE), r.stderr


def test_interactive_requires_max_duration(cli):
    r = cli("interactive")
    assert r.returncode == 2
    assert "--max-duration" in r.stderr
    r = cli("interactive", "--max-duration", "soon")
    assert r.returncode == 2 and "is not a duration" in r.stderr, r.stderr


def test_exec_runs_in_the_ranks_namespace_with_its_secrets_and_exit_code(cli, runs, tmp_path):
    assert cli("secret", "create", "env", "DB_PASSWORD", input=SECRET).returncode == 0
    keyfile = tmp_path / "key.pem"
    keyfile.write_text(f"{SECRET}-file\n")
    r = cli("secret", "create", "file", "pem", "--from", str(keyfile), "--mount-path", "/etc/launcher-exec-test")
    assert r.returncode == 0, r.stderr
    spec = cli.spec(
        "two",
        """\
        name: two
        compute: {nodes: 2}
        parameters: {lr: 0.5, tag: exec-test}
        scheduling: {max_duration: 0.05}
        command: sleep 170
        """,
    )
    r = cli("run", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    name = submitted(r.stdout + r.stderr)
    runs.append(name)
    cli.wait_status(name, {"RUNNING"})

    r = cli("exec", name, "--rank", "1", "--", "cat", "/mnt/config/parameters.yaml")
    assert r.returncode == 0, r.stderr
    assert "lr: 0.5" in r.stdout and "tag: exec-test" in r.stdout
    r = cli("exec", name, "--rank", "1", "--", "sh", "-c", 'echo "$NODE_RANK $PWD"; exit 7')
    assert r.returncode == 7
    assert r.stdout.split() == ["1", str(cli.cwd)]
    # The env secret and the file secret at its mount path, as the rank has them (compared
    # in the rank, so that the value is never printed).
    r = cli(
        "exec",
        name,
        "--",
        "sh",
        "-c",
        f'test "$DB_PASSWORD" = {SECRET} && test "$(cat /etc/launcher-exec-test/secret)" = {SECRET}-file',
    )
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert SECRET not in r.stdout + r.stderr

    r = cli("exec", name, "--rank", "2", "--", "true")
    assert r.returncode == 2 and "has no rank 2" in r.stderr
    r = cli("exec", name, "--", "no-such-command-here")
    assert r.returncode == 2 and "no-such-command-here" in r.stderr
    r = cli("exec", name)
    assert r.returncode == 2 and "no command to run" in r.stderr

    # What exec leaves in the background ends with the run, as the rank's own processes do.
    r = cli("exec", name, "--", "sh", "-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!")
    left = int(r.stdout)
    assert os.path.exists(f"/proc/{left}")
    assert cli("stop", "run", "-y", name).returncode == 0
    wait_until(lambda: ended(left), 30, message="the background process exec started to end with the run")
    r = cli("exec", name, "--", "true")
    assert r.returncode == 2 and "has ended (STOPPED)" in r.stderr


def ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"  # exited, not yet reaped
    except FileNotFoundError:
        return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_port_forward_serves_the_ranks_http_server(cli, runs):
    remote = free_port()
    spec = cli.spec(
        "web",
        f"""\
        name: web
        ports: [{remote}, {{port: 6006, name: tensorboard}}]
        scheduling: {{max_duration: 0.05}}
        command: echo served-by-the-rank > index.html && exec python -m http.server {remote} --bind 127.0.0.1
        """,
    )
    r = cli("run", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    name = submitted(r.stdout + r.stderr)
    runs.append(name)
    described = cli("describe", "run", name)
    assert f"launcher port-forward {name} {remote}:{remote}" in described.stdout
    assert f"launcher port-forward {name} 6006:6006" in described.stdout and "tensorboard" in described.stdout

    forward = subprocess.Popen(
        [sys.executable, "-m", "launcher", "port-forward", name, f"0:{remote}"],
        cwd=cli.cwd,
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = forward.stderr.readline()
        m = re.search(r"Forwarding 127\.0\.0\.1:(\d+) -> rank 0", line)
        assert m, line
        url = f"http://127.0.0.1:{m.group(1)}/index.html"

        def fetched():
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    return response.read().decode()
            except OSError:
                return None  # the rank's server is not listening yet

        assert (
            wait_until(fetched, SHELL_UP, interval=0.2, message="the forwarded server to answer").strip()
            == "served-by-the-rank"
        )
    finally:
        forward.terminate()
        forward.wait(timeout=10)


def test_port_forward_refuses_bad_ports(cli):
    r = cli("port-forward", "whatever", "80:99999")
    assert r.returncode == 2 and "REMOTE port 99999" in r.stderr
    r = cli("port-forward", "whatever", "eighty")
    assert r.returncode == 2 and "is not LOCAL:REMOTE" in r.stderr

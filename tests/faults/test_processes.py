"""Items 3, 7, 10 and 11 of the hardening issue: who owns a rank's processes, what a
dead supervisor leaves, rendezvous of a plain command, and signals at the end.
Processes are found through /proc by the FAULT_TOKEN every one of them inherits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.faults.conftest import describe, processes, ps_of

# A command whose processes escape every way a shell offers: a background job, a new
# session (setsid), and a double fork that reparents to whoever reaps orphans.
ESCAPING = """
  sleep 300 &
  setsid sleep 301 &
  ( ( exec -a fault-daemon sleep 302 & ) & )
  echo "ready $LAUNCHER_ATTEMPT"
"""


def spec_text(token: str, body: str, *, nodes: int = 1, retries: int = 0) -> str:
    return (
        f"name: owned\ncompute: {{nodes: {nodes}}}\n"
        f"scheduling: {{max_retries: {retries}, retry_backoff: {{first: 0.1s}}}}\n"
        f"env_variables: {{FAULT_TOKEN: {token}}}\ncommand: |\n{body}"
    )


def parent(pid: int) -> int:
    stat = open(f"/proc/{pid}/stat").read()
    return int(stat[stat.rfind(")") + 2 :].split()[1])


def alive(pid: int) -> bool:
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def cmdline(pid: int) -> str:
    return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()


def entrypoints(token: str, attempt: int | None = None) -> list[int]:
    """The entrypoints above the processes that carry the token."""
    pids = processes(token) if attempt is None else of_attempt(token, attempt)
    found = set()
    for p in pids:
        try:
            while p > 1 and "launcher.entrypoint" not in cmdline(p):
                p = parent(p)
        except OSError:
            continue
        if p > 1:
            found.add(p)
    return sorted(found)


def of_attempt(token: str, attempt: int) -> list[int]:
    out = []
    for pid in processes(token):
        try:
            if f"LAUNCHER_ATTEMPT={attempt}".encode() in open(f"/proc/{pid}/environ", "rb").read().split(b"\0"):
                out.append(pid)
        except OSError:
            pass
    return out


def logs_show(cli, text: str) -> bool:
    return text in cli("logs").stdout


def test_item3_a_dead_entrypoint_leaves_nothing_and_its_retry_runs_alone(cli, token, kill_leftovers):
    body = (
        ESCAPING + '  if [ "$LAUNCHER_ATTEMPT" = 1 ]; then sleep 300; else sleep 3; fi\n'
        '  echo "attempt $LAUNCHER_ATTEMPT done"\n'
    )
    r = cli("run", "-f", str(cli.spec("dead", spec_text(token, body, retries=1))))
    assert r.returncode == 0, r.stderr
    wait_until(
        lambda: logs_show(cli, "ready 1") and len(of_attempt(token, 1)) >= 4, 30, message="attempt 1 to be ready"
    )
    (victim,) = entrypoints(token, 1)
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: entrypoints(token, 2), 30, message=f"attempt 2 to start: {describe(cli)}")
    # Attempt 1's command, its background jobs and escapees are gone before attempt 2 runs.
    assert of_attempt(token, 1) == [], ps_of(token)
    rec = cli.wait_status(None, {"COMPLETED", "FAILED"})
    assert rec["status"] == "COMPLETED", rec
    assert [a["status"] for a in rec["attempts"]] == ["FAILED", "COMPLETED"]
    assert rec["attempts"][0]["reason"] == f"rank 0 exited with code {128 + signal.SIGKILL}"
    wait_until(lambda: not processes(token), 10, message=f"every process to end:\n{ps_of(token)}")


def test_item3_stop_leaves_nothing(cli, token, kill_leftovers):
    body = ESCAPING + "  trap '' TERM\n  sleep 300\n"
    assert cli("run", "-f", str(cli.spec("stop", spec_text(token, body, nodes=2)))).returncode == 0
    wait_until(lambda: len(processes(token)) >= 8, 30, message="both ranks to be ready")
    began = time.monotonic()
    r = cli("stop", "-y", describe(cli)["name"])
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - began < 30
    assert describe(cli)["status"] == "STOPPED"
    wait_until(lambda: not processes(token), 10, message=f"every process to end:\n{ps_of(token)}")


def test_item3_a_rank_that_cannot_start_takes_the_started_ones_with_it(cli, token, kill_leftovers):
    # Attempt 1 fails on a word from the test; attempt 2's rank 1 cannot open its log
    # (the path is a directory), after rank 0 has started.
    body = (
        ESCAPING + '  if [ "$LAUNCHER_ATTEMPT" = 1 ]; then while [ ! -e go ]; do sleep 0.1; done; exit 3; fi\n'
        "  sleep 300\n"
    )
    assert cli("run", "-f", str(cli.spec("start", spec_text(token, body, nodes=2, retries=1)))).returncode == 0
    rec = cli.wait_status(None, {"RUNNING"})
    (cli.home / "runs" / rec["name"] / "attempt-2" / "rank-1.log").mkdir(parents=True)
    (cli.cwd / "go").touch()
    rec = cli.wait_status(None, {"FAILED", "COMPLETED"})
    assert rec["status"] == "FAILED"
    assert rec["reason"].startswith("could not start rank 1: Is a directory"), rec["reason"]
    ranks = {r["rank"]: r for r in rec["attempts"][1]["ranks"]}
    assert ranks[0]["status"] == ranks[1]["status"] == "FAILED"
    wait_until(lambda: not processes(token), 10, message=f"every process to end:\n{ps_of(token)}")


def supervisor_of(token: str) -> int:
    (pid,) = {parent(p) for p in entrypoints(token)}
    return pid


def test_item7_a_command_that_exited_0_after_its_supervisor_died_is_completed(cli, token, kill_leftovers):
    body = "  echo started\n  sleep 2\n  echo finished\n"
    assert cli("run", "-f", str(cli.spec("orphan", spec_text(token, body, nodes=2)))).returncode == 0
    ranks = wait_until(lambda: len(found := entrypoints(token)) == 2 and found, 30, message="both ranks to start")
    os.kill(supervisor_of(token), signal.SIGKILL)
    # Nobody looks until the ranks have finished on their own.
    wait_until(lambda: not any(alive(p) for p in ranks), 30, message="the ranks to finish")
    rec = describe(cli)
    assert rec["status"] == "COMPLETED", rec
    assert [(r["status"], r["exit_code"]) for r in rec["attempts"][0]["ranks"]] == [("COMPLETED", 0)] * 2


def test_item7_a_run_whose_supervisor_died_mid_command_has_no_rank_left_running(cli, token, kill_leftovers):
    body = ESCAPING + "  sleep 300\n"
    assert cli("run", "-f", str(cli.spec("midway", spec_text(token, body)))).returncode == 0
    wait_until(lambda: len(processes(token)) >= 4, 30, message="the rank to be ready")
    os.kill(supervisor_of(token), signal.SIGKILL)
    rec = cli.wait_status(None, {"FAILED", "COMPLETED"}, timeout=10)
    assert rec["status"] == "FAILED"
    assert "supervisor process died unexpectedly" in rec["reason"]
    assert [r["status"] for a in rec["attempts"] for r in a["ranks"]] == ["FAILED"]
    wait_until(lambda: not processes(token), 10, message=f"every process to end:\n{ps_of(token)}")


def test_item10_a_plain_command_on_two_nodes_finishes_at_once(cli, token, kill_leftovers):
    began = time.monotonic()
    r = cli(
        "run", "-f", str(cli.spec("plain", spec_text(token, '  echo "hello from $NODE_RANK"\n', nodes=2))), "--follow"
    )
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - began < 30
    assert "[rank 0] hello from 0" in r.stdout and "[rank 1] hello from 1" in r.stdout
    rec = describe(cli)
    assert [r["status"] for r in rec["attempts"][0]["ranks"]] == ["COMPLETED", "COMPLETED"]
    logs = cli("logs").stdout
    assert "waiting for node rank 0" not in logs
    assert "[rank 0] hello from 0\n" in logs and "[rank 1] hello from 1\n" in logs
    assert all(line.startswith(("[rank 0] ", "[rank 1] ")) for line in logs.splitlines()), logs


def sigterm_pending(pid: int) -> bool:
    """Whether a SIGTERM sent to `pid` waits to be delivered (Linux's /proc/PID/status)."""
    status = Path(f"/proc/{pid}/status").read_text()
    pending = (int(line.split()[1], 16) for line in status.splitlines() if line.startswith(("SigPnd:", "ShdPnd:")))
    return any(mask & (1 << (signal.SIGTERM - 1)) for mask in pending)


@pytest.fixture
def entry_env(tmp_path):
    """The contract's environment for one entrypoint run directly, as a backend would."""
    import json

    def make(command: str) -> dict[str, str]:
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps({"name": "sig", "command": command}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHER_", "MASTER_", "NODE_RANK"))}
        env.update(
            {
                "LAUNCHER_SPEC": str(spec),
                "LAUNCHER_BACKEND": "local",
                "LAUNCHER_ON_HOST": "1",
                "LAUNCHER_CONFIG_DIR": str(tmp_path / "c"),
                "LAUNCHER_WORKDIR": str(tmp_path),
                "LAUNCHER_NODES": "1",
                "NODE_RANK": "0",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": "29500",
                "LAUNCHER_EXIT_FILE": str(tmp_path / "exit.json"),
            }
        )
        return env

    return make


def test_item11_a_signal_after_the_command_exited_changes_nothing(entry_env, tmp_path):
    # The command writes more than our stdout pipe holds and exits; while nobody reads
    # that pipe the entrypoint is still draining, and then gets SIGTERM twice.
    env = entry_env("head -c 900000 /dev/zero | tr '\\0' x; echo; touch exited; exit 5")
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher.entrypoint"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_until(lambda: (tmp_path / "exited").exists(), 30, message="the command to exit")
        # A stated window, kept as a sleep: for half a second after its command exited the
        # entrypoint must not exit, as it has output nobody has read yet.
        time.sleep(0.5)
        assert proc.poll() is None  # still draining: nobody has read its output yet
        proc.send_signal(signal.SIGTERM)
        # Two signals, not one: a second SIGTERM sent while the first is pending merges with it.
        wait_until(
            lambda: not sigterm_pending(proc.pid), 10, interval=0.01, message="the first SIGTERM to be delivered"
        )
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=30)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 5, out[-2000:]
    assert out.count("x") >= 900000
    assert "received SIGTERM after the command had exited; its exit code stands" in out
    assert "before the command started" not in out and "Traceback" not in out
    assert '"exit_code": 5' in (tmp_path / "exit.json").read_text()


def test_item3_as_pid_1_of_a_container_it_reaps_orphans_and_passes_signals_on(entry_env, tmp_path):
    """In a container the entrypoint is PID 1: orphans of the command come to it, and a
    stop from the runtime reaches the command through it."""
    import shutil

    unshare = shutil.which("unshare")
    probe = subprocess.run([unshare or "unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    if os.geteuid() != 0 or not unshare or probe.returncode:
        pytest.skip("needs root and unshare --pid to start a process as PID 1")
    command = (
        "for i in 1 2 3; do (sleep 0.2 &); done; sleep 1.5\n"
        "echo \"zombies: $(ps -eo stat= | grep -c '^Z')\"\n"
        'echo "entrypoint pid: $PPID"\n'
        "trap 'echo got TERM; exit 7' TERM; echo ready; while true; do sleep 0.1; done"
    )
    proc = subprocess.Popen(
        [unshare, "--pid", "--fork", "--mount-proc", sys.executable, "-m", "launcher.entrypoint"],
        env=entry_env(command),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        seen = []
        while not any("ready" in line for line in seen):
            line = proc.stdout.readline()
            assert line, "".join(seen)
            seen.append(line)
        assert "zombies: 0\n" in seen and "entrypoint pid: 1\n" in seen, "".join(seen)
        (inner,) = [int(p) for p in open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()]
        os.kill(inner, signal.SIGTERM)  # what the container runtime does to PID 1
        rest = proc.communicate(timeout=30)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "got TERM" in rest and "exit code 7" in rest, rest

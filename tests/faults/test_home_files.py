"""Item 6 of the third hardening issue: the launcher home's files. `delete` frees space on a
full disk; a submit killed before it recorded its run leaves nothing that no command lists;
a read-only home can be read; the home is 0700 and its databases 0600 whatever mode they
had. Every case is the real CLI in a subprocess; the disk cases use a small real tmpfs
(they skip where mounting one is not permitted)."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests.faults.conftest import describe, processes
from tests.metrics.logdata import step_line

LOUD = "  for i in $(seq 40); do head -c 1000000 /dev/zero | tr '\\\\0' x; echo; done\n"


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill_with_a_failed_run(cli, token: str) -> str:
    """A run that writes until the home's disk is full, and so fails: its name."""
    spec = cli.spec("loud", f"name: loud\nenv_variables: {{FAULT_TOKEN: {token}}}\ncommand: |\n{LOUD}")
    r = cli("run", "-f", str(spec), "--follow", timeout=120)
    assert r.returncode == 1 and "disk full writing logs" in r.stderr, r.stderr
    assert free_bytes(cli.home) < 64 * 1024
    return describe(cli)["name"]


@pytest.mark.parametrize("how", ["by-name", "all"])
def test_item6_delete_frees_space_on_a_full_disk(cli, small_tmpfs, token, kill_leftovers, how):
    home = small_tmpfs(cli.home, "2m")
    name = fill_with_a_failed_run(cli, token)
    r = cli("delete", *([name] if how == "by-name" else ["-a"]), "-y")
    assert r.returncode == 0, r.stderr  # it said "free some space" and exit 2
    assert "free some space" not in r.stderr
    assert not (home / "runs" / name).exists()
    assert free_bytes(home) > 1024 * 1024
    listed = cli("get", "runs", "-o", "json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], (listed.stdout, listed.stderr)
    assert not processes(token)


def test_item6_a_submit_killed_before_its_record_leaves_nothing(cli):
    """The submit is held where it has written the run's directory (its --code snapshot
    copy in it) and waits to write the record (this test holds state.db's write lock),
    then killed with SIGKILL. The next command removes the directory; so does delete -a."""
    (cli.cwd / "code").mkdir()
    (cli.cwd / "code" / "train.py").write_text("print('hi')\n" * 20_000)
    spec = cli.spec("held", "name: held\ncommand: python train.py\n")
    assert cli("get", "runs").returncode == 0  # state.db exists, to be locked
    for then in (["get", "runs"], ["delete", "-a", "-y"]):
        db = sqlite3.connect(cli.home / "state.db", isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        try:
            submit = cli.popen("run", "-f", str(spec), "--code", "code")
            deadline = time.monotonic() + 60
            while not list((cli.home / "runs").glob("held-*/code.tar.gz")) and time.monotonic() < deadline:
                assert submit.poll() is None, submit.communicate()
                time.sleep(0.05)
            (left,) = list((cli.home / "runs").glob("held-*"))
            time.sleep(0.3)  # the snapshot written whole
            submit.kill()
            submit.communicate()
        finally:
            db.execute("ROLLBACK")
            db.close()
        assert left.exists()
        r = cli(*then)
        assert r.returncode == 0, r.stderr
        assert not left.exists(), sorted(p.name for p in left.iterdir())
        assert not any((cli.home / "runs").iterdir())


def test_item6_runs_that_state_db_forgets_keep_their_files(cli):
    """The way out of a corrupt state.db moves it away, and says the runs' logs stay under
    runs/: the sweep of interrupted submits leaves them."""
    spec = cli.spec("kept", "name: kept\ncommand: echo kept\n")
    assert cli("run", "-f", str(spec), "--follow").returncode == 0
    (kept,) = list((cli.home / "runs").iterdir())
    for suffix in ("", "-wal", "-shm"):
        if (cli.home / f"state.db{suffix}").exists():
            (cli.home / f"state.db{suffix}").rename(cli.home / f"state.db{suffix}.corrupt")
    r = cli("get", "runs")
    assert r.returncode == 0 and "No runs found" in r.stdout, r.stderr
    assert kept.exists() and list(kept.rglob("rank-0.log"))


def run_with_metrics(cli) -> str:
    (cli.cwd / "log.txt").write_text("\n".join(step_line(s) for s in range(1, 4)) + "\n")
    spec = cli.spec("m", "name: m\ncommand: cat log.txt\n")
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    return describe(cli)["name"]


def test_item6_a_read_only_home_can_be_read(cli, small_tmpfs):
    home = small_tmpfs(cli.home, "20m")
    name = run_with_metrics(cli)
    remounted = subprocess.run(["mount", "-o", "remount,ro", str(home)], capture_output=True, text=True)
    if remounted.returncode:
        pytest.skip(f"cannot remount the tmpfs read-only: {remounted.stderr.strip()}")
    try:
        listed = cli("get", "runs", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        assert [r["name"] for r in json.loads(listed.stdout)] == [name]
        described = cli("describe", "run", name, "-o", "json")
        assert described.returncode == 0 and json.loads(described.stdout)["status"] == "COMPLETED", described.stderr
        logs = cli("logs", name)
        assert logs.returncode == 0 and "exit code 0" in logs.stdout, logs.stderr
        metrics = cli("metrics", name)
        assert metrics.returncode == 0, metrics.stderr
        # A change says why it cannot be made, naming the file.
        deleted = cli("delete", name, "-y")
        assert deleted.returncode == 2 and f"{home}/state.db: cannot open it for writing" in deleted.stderr
        assert "Traceback" not in deleted.stderr
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(home)], capture_output=True)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_item6_the_home_is_0700_and_its_databases_0600_whatever_they_were(cli):
    assert cli("get", "runs").returncode == 0
    assert cli("describe", "run").returncode == 2  # opens index.db: no run yet
    home = cli.home
    assert mode(home / "state.db") == 0o600 and mode(home / "index.db") == 0o600  # made so
    os.chmod(home, 0o755)
    for db in ("state.db", "index.db"):
        os.chmod(home / db, 0o644)
    r = cli("get", "runs")
    assert r.returncode == 0, r.stderr
    r = cli("describe", "run")
    assert mode(home) == 0o700
    assert mode(home / "state.db") == 0o600 and mode(home / "index.db") == 0o600
    assert all(mode(p) & 0o077 == 0 for p in home.glob("*.db*")), {p.name: oct(mode(p)) for p in home.iterdir()}

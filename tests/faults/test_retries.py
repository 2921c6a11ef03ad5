"""Items 9 and 10 of hardening part two: retries back off (scheduling.retry_backoff, doubling
from its first delay) and a command that crashes on every attempt is called a crash loop;
`logs -f` on a run deleted under it exits 1 saying so; the mount points a root run
created on this machine go when it ends. The real CLI in a subprocess, on the local
backend (the Kubernetes side is tests/kubernetes/test_backoff.py)."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.faults.conftest import describe, processes, ps_of
from tests.faults.test_processes import entrypoints, supervisor_of


def started_and_ended(record: dict) -> list[tuple[datetime, datetime]]:
    return [
        (datetime.fromisoformat(a["started_at"]), datetime.fromisoformat(a["ended_at"])) for a in record["attempts"]
    ]


def test_item9_retries_back_off_doubling_and_a_crash_loop_is_named(cli):
    spec = cli.spec(
        "crash",
        """\
        name: crash
        command: echo starting; exit 3
        scheduling: {max_retries: 2, retry_backoff: {first: 1s, max: 1m}}
        """,
    )
    r = cli("run", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    # While it waits for a retry, describe says when it is due.
    text = wait_until(
        lambda: "Next retry: attempt 3" in (out := cli("describe", "crash").stdout) and out,
        30,
        interval=0.1,
        message="the run to wait for its second retry",
    )
    assert "Status:     PENDING (attempt 2 failed (rank 0 exited with code 3); a retry is due at " in text
    assert "Retries:    up to 2; backoff 1 s doubling to 1 min" in text
    record = cli.wait_status("crash", {"FAILED"})
    times = started_and_ended(record)
    gaps = [(nxt[0] - prev[1]).total_seconds() for prev, nxt in itertools.pairwise(times)]
    assert len(gaps) == 2 and gaps[0] >= 1 and gaps[1] >= 2, gaps  # 1 s, then doubled
    assert record["crash_loop"] is True
    text = cli("describe", "crash").stdout
    assert "Crash loop: each of its 3 attempts failed within 10 s of starting" in text
    assert "Attempt 3: FAILED (rank 0 exited with code 3), started 2." in text
    listing = cli("get", "runs").stdout
    assert "crash loop; rank 0 exited with code 3" in listing


def test_item9_a_stop_while_a_retry_waits_ends_the_run_stopped(cli):
    cli.spec(
        "waits",
        """\
        name: waits
        command: exit 3
        scheduling: {max_retries: 1, retry_backoff: {first: 5m}}
        """,
    )
    assert cli("run", "-f", str(cli.cwd / "waits.yaml")).returncode == 0
    waiting = wait_until(
        lambda: (rec := describe(cli, "waits"))["retry_at"] and rec,
        30,
        interval=0.1,
        message="the run to wait out its 5 min backoff",
    )
    assert waiting["status"] == "PENDING" and not waiting["crash_loop"]  # one attempt is no loop
    r = cli("stop", "waits", "-y")
    assert r.returncode == 0, r.stderr
    record = describe(cli, "waits")
    assert record["status"] == "STOPPED" and record["retry_at"] is None
    assert [(a["attempt"], a["status"]) for a in record["attempts"]] == [(1, "FAILED")]


def test_item10_logs_follow_of_a_run_deleted_under_it_exits_1(cli):
    cli.spec(
        "long",
        """\
        name: long
        command: while true; do echo tick; sleep 0.2; done
        """,
    )
    assert cli("run", "-f", str(cli.cwd / "long.yaml")).returncode == 0
    cli.wait_status("long", {"RUNNING"})
    follower = cli.popen("logs", "long", "-f")
    try:
        lines = iter(follower.stdout.readline, "")
        assert "tick" in (next(lines).strip() for _ in range(20)), "the follow printed no tick"
        name = describe(cli, "long")["name"]
        r = cli("delete", "run", name, "-y")
        assert r.returncode == 0, r.stderr
        _, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 1, err
    assert f"run {name} was deleted while following its logs" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("ending", ["completed", "failed", "stopped", "supervisor killed"])
def test_item10_the_mount_points_a_run_created_are_removed_when_it_ends(cli, token, tmp_path, kill_leftovers, ending):
    if os.geteuid() != 0:
        pytest.skip("only root's runs create mount points on this machine")
    created = Path(f"/launcher-fault-{token}")  # nothing of it exists: the run creates it all
    existing = tmp_path / "existing"  # there before the run: it stays
    existing.mkdir()
    (tmp_path / "secret.txt").write_text("value\n")
    for name, mount in (("deep", f"{created}/a/creds"), ("shallow", f"{existing}/creds")):
        r = cli("secret", "create", "file", name, "--from", str(tmp_path / "secret.txt"), "--mount-path", mount)
        assert r.returncode == 0, r.stderr
    command = {"completed": "true", "failed": "exit 3", "stopped": "sleep 300", "supervisor killed": "sleep 300"}[
        ending
    ]
    cli.spec(
        "mounts",
        f"""\
        name: mounts
        command: cat {created}/a/creds/secret {existing}/creds/secret >/dev/null && {command}
        env_variables: {{FAULT_TOKEN: {token}}}
        """,
    )
    try:
        assert cli("run", "-f", str(cli.cwd / "mounts.yaml")).returncode == 0
        if ending in ("stopped", "supervisor killed"):
            record = cli.wait_status("mounts", {"RUNNING"})
            assert (created / "a" / "creds").is_dir() and (existing / "creds").is_dir()
            if ending == "stopped":
                assert cli("stop", record["name"], "-y").returncode == 0
            else:
                wait_until(lambda: entrypoints(token), 30, message="the rank to start")
                os.kill(supervisor_of(token), signal.SIGKILL)
        record = cli.wait_status("mounts", {"COMPLETED", "FAILED", "STOPPED"})
        if ending == "completed":
            assert record["status"] == "COMPLETED", record
        # The next read recovers a run whose supervisor died: it ends it, and removes them then.
        wait_until(
            lambda: not created.exists() and not (existing / "creds").exists(),
            30,
            message=lambda: (
                f"the mount points to go: {sorted(map(str, created.rglob('*')))} {sorted(map(str, existing.iterdir()))}"
            ),
        )
        assert existing.is_dir(), "a directory that was there before the run was removed"
    finally:
        cli("delete", "run", "mounts-*", "-y")
        if created.exists():
            for path in sorted(created.rglob("*"), key=lambda p: len(str(p)), reverse=True):
                path.rmdir()
            created.rmdir()


def test_a_delete_interrupted_after_it_hid_the_run_is_finished_by_deleting_it_again(cli, token, kill_leftovers):
    """A delete killed between hiding the run and stopping its ranks leaves what the state
    file holds below: stop_requested 2 and a deleter that is gone, the ranks alive. The run
    shows again, and deleting it by name stops its ranks and removes it: nothing is orphaned."""
    import sqlite3

    cli.spec(
        "hidden",
        f"""\
        name: hidden
        command: sleep 300
        env_variables: {{FAULT_TOKEN: {token}}}
        """,
    )
    assert cli("run", "-f", str(cli.cwd / "hidden.yaml")).returncode == 0
    cli.wait_status("hidden", {"RUNNING"})
    name = describe(cli, "hidden")["name"]
    wait_until(
        lambda: any("sleep 300" in c for c in processes(token).values()),
        timeout=60,
        message="the run's command never started",
    )
    gone = subprocess.Popen(["true"])
    gone.wait()  # the deleter: a process that is no longer alive
    with sqlite3.connect(cli.home / "state.db") as db:
        db.execute("UPDATE runs SET stop_requested = 2, deleter = ? WHERE name = ?", (f"{gone.pid} 0", name))
    assert cli("describe", "run", name).returncode == 0, "the run of an interrupted delete is hidden for good"
    r = cli("delete", "run", name, "-y")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: not processes(token), timeout=60, message=f"ranks left after the delete: {ps_of(token)}")
    assert not (cli.home / "runs" / name).exists()
    assert cli("describe", "run", name).returncode == 2

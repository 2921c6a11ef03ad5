"""`get runs` on the local backend reads the state a page at a time, newest first: a
limit with filters that keep few runs walks further pages (each twice the last) and
still shows the newest matches once each, as the listing without a limit orders them."""

from __future__ import annotations

import json

from launcher import sdk
from tests.conftest import wait_until


def submit(n: int, name: str, command: str = "true") -> list[str]:
    return [sdk.create_run({"name": name, "command": command}, backend="local").name for _ in range(n)]


def test_a_limit_with_filters_pages_newest_first_without_duplicates(cli):
    old = submit(6, "old")
    failed = submit(3, "bad", "exit 3")
    submit(14, "new")
    wait_until(lambda: all(r.status.is_terminal for r in sdk.get_runs()), 60, message="every run ended")
    everything = [r.name for r in sdk.get_runs()]
    assert len(everything) == len(set(everything)) == 23

    def names(*args: str) -> list[str]:
        r = cli("get", "runs", "-o", "name", *args)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    # The old runs lie past three pages of the newer ones (pages of 4, 8, 16).
    assert names("old", "--limit", "4") == [n for n in everything if n in old][:4]
    assert names("--status", "failed", "--limit", "2") == [n for n in everything if n in failed][:2]
    assert names("--limit", "5") == everything[:5]
    assert names("-l") == everything[:1]
    rows = json.loads(cli("get", "runs", "old-*", "bad", "--limit", "50", "-o", "json").stdout)
    assert [r["name"] for r in rows] == [n for n in everything if n in old or n in failed]


def test_delete_before_a_date_and_by_status_keeps_the_rest(cli):
    from datetime import datetime, timedelta

    kept = submit(2, "keep")
    failed = submit(2, "bad", "exit 3")
    wait_until(lambda: all(r.status.is_terminal for r in sdk.get_runs()), 60, message="every run ended")

    def names() -> set[str]:
        return set(cli("get", "runs", "-o", "name").stdout.split())

    r = cli("delete", "--before", "2000-01-01", "-y")
    assert r.returncode == 0 and "Nothing to delete: no run matches." in r.stdout
    r = cli("delete", "--status", "failed", "-y")
    assert r.returncode == 0, r.stderr
    assert all(f"Deleted run {n}" in r.stdout for n in failed)
    assert names() == set(kept)
    tomorrow = (datetime.now() + timedelta(days=1)).strftime("%Y-%m-%d")
    r = cli("delete", "--before", tomorrow, "--status", "completed", "-y")
    assert r.returncode == 0 and names() == set()
    r = cli("delete", "--status", "nope", "-y")
    assert r.returncode == 2 and "'nope' is not a status" in r.stderr and "Traceback" not in r.stderr

"""launcher.homefile: the locked read-modify-write of the launcher home's state files."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import subprocess
import sys

import pytest

from launcher import homefile
from launcher.errors import StateFileError

WRITERS = 16
ROUNDS = 20

# Each writer appends "<writer>:<round>" to a JSON list, ROUNDS times.
APPEND = """
import json, sys
from pathlib import Path
from launcher import homefile
path, writer, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
print("started", flush=True)
for i in range(rounds):
    homefile.update(path, lambda raw: json.dumps(json.loads(raw or b"[]") + [f"{writer}:{i}"]).encode())
print("done", flush=True)
"""


def test_sixteen_writer_processes_lose_no_write(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("[]")
    path.chmod(0o640)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", APPEND, str(path), str(w), str(ROUNDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WRITERS)
    ]
    for p in writers:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out == "started\ndone\n", err
    entries = json.loads(path.read_text())
    assert sorted(entries) == sorted(f"{w}:{i}" for w in range(WRITERS) for i in range(ROUNDS))
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # an existing file keeps its mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "state.json.lock"]  # no temp file left


def test_a_change_waits_for_the_lock_another_process_holds(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("[]")
    lock = os.open(tmp_path / "state.json.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        writer = subprocess.Popen(
            [sys.executable, "-c", APPEND, str(path), "w", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # While the lock is held, the writer, started, waits; the file stays as it was.
        assert writer.stdout.readline() == "started\n"
        with pytest.raises(subprocess.TimeoutExpired):
            writer.wait(timeout=1)
        assert path.read_text() == "[]"
    finally:
        os.close(lock)
    out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0 and out == "done\n", err
    assert json.loads(path.read_text()) == ["w:0"]


def test_a_new_file_gets_the_mode_asked_and_a_refused_change_writes_nothing(tmp_path):
    path = tmp_path / "sub" / "secrets.json"
    homefile.update(path, lambda raw: b"{}" if raw is None else pytest.fail("there was no file"), mode=0o600)
    assert path.read_bytes() == b"{}" and stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    homefile.update(path, lambda raw: raw + b"\n", mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # a secrets file is 0600 whatever it was

    def refuse(raw):
        raise ValueError("no")

    with pytest.raises(ValueError):
        homefile.update(path, refuse)
    homefile.update(path, lambda raw: None)
    assert path.read_bytes() == b"{}\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["secrets.json", "secrets.json.lock"]


def test_a_new_file_without_a_mode_gets_what_the_umask_gives(tmp_path):
    old = os.umask(0o027)
    try:
        homefile.update(tmp_path / "config.yaml", lambda raw: b"current: local\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "config.yaml").stat().st_mode) == 0o640


def test_unusable_places_are_state_file_errors_naming_the_path(tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(StateFileError, match=f"{tmp_path / 'dir.json'} is a directory, not a file"):
        homefile.read(tmp_path / "dir.json")
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(StateFileError, match=f"{ro / 'x.json'}: cannot write it"):
            homefile.update(ro / "x.json", lambda raw: b"{}")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StateFileError, match=f"{blocker / 'x.json'}: cannot write it"):
        homefile.update(blocker / "x.json", lambda raw: b"{}")
    assert homefile.read(tmp_path / "absent.json") is None

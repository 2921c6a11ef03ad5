"""The rank's log archive: the writer's chunks (launcher.entrypoint.archive) and the host's
reader (launcher.backends.kubernetes.archive) agree, byte for byte and line for line, on a
local directory, dbfs:/Volumes on the fake Files API and s3:// on moto."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from launcher.backends.kubernetes.archive import LogArchive
from launcher.entrypoint.archive import ChunkedArchive, open_archive
from launcher.pod.logarchive import LOG_ARCHIVE, parse_chunk
from launcher.storage import Credentials, open_store
from tests.conftest import wait_until


class Puts:
    """A put that keeps what was written, in order."""

    def __init__(self, fail: int = 0):
        self.objects: dict[str, bytes] = {}
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, rel: str, data: bytes) -> None:
        with self.lock:
            if self.fail:
                self.fail -= 1
                raise OSError("the store is down")
            self.objects[rel] = data

    def joined(self) -> bytes:
        return b"".join(self.objects[k] for k in sorted(self.objects))


def test_chunks_are_whole_lines_in_order_and_join_to_the_log():
    puts = Puts()
    archive = ChunkedArchive(puts, "attempt-1/rank-0", chunk_bytes=100, chunk_seconds=60)
    written = b"".join(f"line {i} ".encode() + b"x" * (i % 7) + b"\n" for i in range(200))
    for i in range(0, len(written), 13):  # arrives in pieces that split lines
        archive.append(written[i : i + 13])
    assert archive.close()
    assert puts.joined() == written
    names = sorted(puts.objects)
    assert all(n.startswith("attempt-1/rank-0/") for n in names)
    assert [parse_chunk(n.rsplit("/", 1)[1])[0] for n in names] == list(range(len(names)))
    assert len(names) > 5 and all(puts.objects[n].endswith(b"\n") for n in names)
    assert all(len(puts.objects[n]) <= 100 for n in names)


def test_a_quiet_log_is_written_after_chunk_seconds_and_a_long_line_alone():
    puts = Puts()
    archive = ChunkedArchive(puts, "p", chunk_bytes=50, chunk_seconds=0.2)
    archive.append(b"first\n")
    wait_until(lambda: puts.objects, 5, message="the first chunk, written without more output")
    archive.append(b"y" * 120)  # one line longer than a chunk, with no end yet
    wait_until(lambda: len(puts.joined()) >= 100, 5, message="the long line, in chunk-sized pieces")
    archive.append(b"\nlast, without a newline")
    assert archive.close()
    assert puts.joined() == b"first\n" + b"y" * 120 + b"\nlast, without a newline"


def test_a_failing_store_is_said_once_and_its_chunk_written_later():
    puts = Puts(fail=2)
    said: list[str] = []
    archive = ChunkedArchive(puts, "p", chunk_bytes=10, chunk_seconds=0.05, on_error=said.append)
    archive.append(b"0123456789\nabc\n")
    wait_until(lambda: puts.objects, 10, message="the chunk, once the store is back")
    assert archive.close()
    assert puts.joined() == b"0123456789\nabc\n"
    assert said == ["log archive: cannot write a chunk: the store is down; trying again, the pod log has every line"]


@pytest.fixture(params=["local", "volume", "s3"])
def store_url(request, tmp_path: Path):
    """(url, env) of an archive root on each kind of storage."""
    if request.param == "local":
        return str(tmp_path / "logs" / "run-abc"), {}
    if request.param == "volume":
        pytest.importorskip("databricks.sdk")
        fake = request.getfixturevalue("databricks_files")
        return "dbfs:/Volumes/main/default/data/logs/run-abc", fake.env()
    s3 = request.getfixturevalue("s3")
    return "s3://launcher-test/logs/run-abc", s3.env()


def test_what_a_rank_archives_is_what_the_reader_reads_line_by_line(store_url):
    url, env = store_url
    said: list[str] = []
    archive = open_archive({LOG_ARCHIVE: url, **env}, 2, 1, on_error=said.append)
    lines = [f"rank 1 line {i}" for i in range(50)] + ["ünïcode ✓"]
    for line in lines:
        archive.append(line.encode() + b"\n")
    archive.append(b"partial")
    assert archive.close() and said == []

    reader = LogArchive(open_store(url, Credentials(env)))
    assert sorted(reader.ranks(2)) == [1] and reader.ranks(1) == {}
    got = list(reader.lines(2, 1))
    assert [t for _, t in got] == [*lines, "partial"]
    assert all(stamp > 0 for stamp, _ in got)
    assert [t for _, t in reader.lines(2, 1, skip=48)] == [*lines[48:], "partial"]

    # A second container of the same rank and attempt goes on numbering after the first's chunks.
    again = open_archive({LOG_ARCHIVE: url, **env}, 2, 1, on_error=said.append)
    again.append(b"restarted\n")
    assert again.close()
    reader.forget(2)
    assert [t for _, t in reader.lines(2, 1)] == [*lines, "partialrestarted"]

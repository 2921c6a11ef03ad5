"""The filesystem boundary's words (launcher.errors): one errno -> words mapping for every
message that names an OSError's cause, and the path it names."""

from __future__ import annotations

import errno
import os

import pytest

from launcher.errors import FileSystemError, InputError, file_boundary, open_file_limit, os_error_words


@pytest.mark.parametrize(
    "code, words",
    [
        (errno.ENOSPC, "the disk is full (ENOSPC)"),
        (errno.EDQUOT, "the disk quota is used up (EDQUOT)"),
        (errno.EROFS, "the file system is read-only (EROFS)"),
        (errno.EACCES, "permission denied (EACCES)"),
        (errno.EPERM, "permission denied (EPERM)"),
        (errno.ENOTDIR, "not a directory (ENOTDIR)"),
        (errno.EISDIR, "is a directory (EISDIR)"),
        (errno.ENFILE, "too many open files on this machine (ENFILE)"),
        (errno.ENOENT, "no such file or directory (ENOENT)"),
        (errno.EIO, "input/output error (EIO)"),
    ],
)
def test_each_cause_in_words(code, words):
    assert os_error_words(OSError(code, os.strerror(code))) == words


def test_too_many_open_files_says_the_limit():
    assert os_error_words(OSError(errno.EMFILE, "x")) == (
        f"too many open files (this process may open {open_file_limit()}: ulimit -n) (EMFILE)"
    )


def test_a_file_where_a_directory_is_needed_is_named_itself(tmp_path):
    (tmp_path / "runs").write_text("")
    with pytest.raises(NotADirectoryError) as e:
        (tmp_path / "runs" / "a" / "b").mkdir(parents=True)
    error = FileSystemError.of(e.value)
    assert isinstance(error, InputError) and error.exit_code == 2
    assert error.message == f"{tmp_path / 'runs'} is a file, not a directory (needed for {e.value.filename})"
    assert error.hint == f"move {tmp_path / 'runs'} away, or choose another path"


def test_the_boundary_names_the_path_a_write_without_a_filename_was_for(tmp_path):
    with pytest.raises(FileSystemError) as e, file_boundary(tmp_path / "out.jsonl", "write"):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert e.value.message == f"cannot write {tmp_path / 'out.jsonl'}: the disk is full (ENOSPC)"
    assert e.value.hint == f"free some space on the disk that holds {tmp_path / 'out.jsonl'} and run again"
    # Another file's error names that file.
    with pytest.raises(FileSystemError) as e, file_boundary(tmp_path / "out", "write"):
        open(tmp_path / "missing" / "x")
    assert e.value.message == f"{tmp_path / 'missing' / 'x'}: no such file or directory (ENOENT)"
    # What is not the filesystem's passes through.
    with pytest.raises(ConnectionRefusedError), file_boundary(tmp_path / "out", "write"):
        raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")

"""What `launcher data convert` shows while it works: on a terminal, a live line of documents,
tokens and MB/s of text (launcher/data/progress.py); in a pipe or a log, no live display,
only the summary at the end."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import needs

needs("streaming", reason="needs the train extra")

from tests.conftest import read_terminal

from .conftest import documents, expected_stream, write_jsonl

pytestmark = pytest.mark.train

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")  # colours, bold, cursor moves


def convert_command(tmp_path: Path, tokenizer_dir: Path, docs: list[str]) -> list[str]:
    src = write_jsonl(tmp_path / "in.jsonl", docs)
    return [
        sys.executable,
        "-m",
        "launcher",
        "data",
        "convert",
        str(src),
        "--out",
        str(tmp_path / "out"),
        "--tokenizer",
        str(tokenizer_dir),
        "--concat-tokens",
        "64",
    ]


def test_on_a_terminal_convert_shows_documents_tokens_and_mb_per_second(tmp_path, tokenizer_dir):
    docs = documents(700)
    master, terminal = pty.openpty()
    env = {**os.environ, "COLUMNS": "160", "TERM": "xterm"}
    proc = subprocess.Popen(
        convert_command(tmp_path, tokenizer_dir, docs), stdout=subprocess.PIPE, stderr=terminal, env=env
    )
    os.close(terminal)
    shown = read_terminal(master)
    out = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 0, shown.decode(errors="replace")
    text = ESCAPES.sub("", shown.decode(errors="replace")).replace("\r", "\n")
    finals = re.findall(r"converting \(1 worker\)\s+([\d,]+) docs\s+([\d,]+) tokens\s+([\d.]+) MB/s", text)
    assert finals, text
    # The last frame: every document and every input token, at some rate of text.
    documents_shown, tokens_shown, rate = finals[-1]
    assert int(documents_shown.replace(",", "")) == 700
    assert int(tokens_shown.replace(",", "")) == len(expected_stream(tokenizer_dir, docs))
    assert float(rate) > 0
    assert "Converted 700 documents" in out


def test_in_a_pipe_convert_prints_no_live_display_only_the_summary(tmp_path, tokenizer_dir):
    done = subprocess.run(
        convert_command(tmp_path, tokenizer_dir, documents(300)), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert " docs " not in done.stderr and "MB/s" not in done.stderr and "\x1b[" not in done.stderr
    assert "Converted 300 documents" in done.stdout and "MB/s of text" in done.stdout

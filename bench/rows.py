"""The one shape every benchmark reports in, for bench/all.py's table.

A benchmark script takes `--quick` (a short run, seconds to a minute) and `--rows FILE`
(write its results there as a JSON list of rows); it still prints its own numbers.

    from rows import add_row_args, Row, write_rows
    add_row_args(parser)
    ...
    write_rows(args, [Row("launcher --help wall", "python -c pass 25 ms", "31 ms", 1.24, "<= 1.5x")])
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Row:
    measure: str
    """What was measured, in a user's words: "`launcher --help` wall"."""
    yardstick: str
    """What it is compared with, and its number: "`python -c pass` 25 ms"."""
    ours: str
    """Our number, with its unit: "31 ms"."""
    ratio: float | None
    """ours / yardstick (or yardstick / ours for throughputs: always "1.0 is the yardstick's speed",
    the way the goal is stated); None where there is no yardstick."""
    goal: str
    """The goal, as issue 25 states it: "<= 1.5x the floor"."""
    met: bool | None = None
    """Whether the goal is met; None where it cannot be judged by this run."""


def add_row_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a short run, for bench/all.py")
    parser.add_argument("--rows", type=Path, help="write the results as JSON rows (bench/rows.py) to this file")


def write_rows(args: argparse.Namespace, rows: list[Row]) -> None:
    if getattr(args, "rows", None):
        Path(args.rows).write_text(json.dumps([asdict(r) for r in rows], indent=1))

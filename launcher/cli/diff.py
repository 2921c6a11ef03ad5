"""`launcher diff run A B` (mcli's `diff run`): two runs' specs as submitted, resolved, as a
unified diff or side by side."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import click

from launcher.cli.common import NounGroup, complete_run_names, find_run, to_yaml


@click.group(cls=NounGroup, default="run", subcommand_metavar="[run] A B")
def diff():
    """Compare two runs. `diff A B` is short for `diff run A B`."""


def spec_lines(spec: Mapping[str, Any]) -> list[str]:
    return to_yaml(spec).splitlines()


def unified(a: str, a_lines: list[str], b: str, b_lines: list[str]) -> list[str]:
    return list(difflib.unified_diff(a_lines, b_lines, fromfile=a, tofile=b, lineterm="", n=3))


def two_columns(a_lines: list[str], b_lines: list[str], width: int = 160) -> list[str]:
    """Both specs in two columns, as `diff -y` prints them (mcli's view): `|` a changed line,
    `<` one only A has, `>` one only B has."""
    half = (width - 3) // 2
    out = []

    def row(left: str, mark: str, right: str) -> str:
        return f"{left[:half]:<{half}} {mark} {right[:half]}".rstrip()

    matcher = difflib.SequenceMatcher(a=a_lines, b=b_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        left, right = a_lines[i1:i2], b_lines[j1:j2]
        if tag == "equal":
            out += [row(x, " ", x) for x in left]
            continue
        for k in range(max(len(left), len(right))):
            x = left[k] if k < len(left) else None
            y = right[k] if k < len(right) else None
            out.append(row(x or "", "|" if x is not None and y is not None else "<" if y is None else ">", y or ""))
    return out


@diff.command("run")
@click.argument("first", metavar="A", shell_complete=complete_run_names)
@click.argument("second", metavar="B", shell_complete=complete_run_names)
@click.option("-y", "--side-by-side", is_flag=True, help="Two columns, as mcli (`diff -y`) shows them.")
@click.option("-W", "--width", type=click.IntRange(min=40), default=160, show_default=True, help="With -y: columns.")
def diff_run(first, second, side_by_side, width):
    """The specs of runs A and B as submitted (resolved: overrides and defaults applied,
    secret-free), as a unified diff, or side by side with -y. A and B take every form of a
    run's name (full, spec name, glob, a start). Exits 0 whether they differ or not, as
    mcli's; `No difference` when they do not.

    \b
    Examples:
      launcher diff run hello-x7k2pq hello-p9m3qd
      launcher diff hello-x7k2pq hello-p9m3qd -y
    """
    _, a = find_run(first)
    _, b = find_run(second)
    a_lines, b_lines = spec_lines(a.spec), spec_lines(b.spec)
    if side_by_side:
        click.echo(f"{a.name:<{(width - 3) // 2}}   {b.name}")
        for line in two_columns(a_lines, b_lines, width):
            click.echo(line)
        return
    lines = unified(a.name, a_lines, b.name, b_lines)
    if not lines:
        click.echo(f"No difference: runs {a.name} and {b.name} were submitted with the same spec.")
        return
    for line in lines:
        click.echo(line)

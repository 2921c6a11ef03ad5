"""The `launcher` command's entry point. Subcommands are imported only when they are
invoked (launcher.cli.group holds the click group, launcher.cli.commands its table), so
`launcher --help` never pulls in pydantic, kubernetes, torch or databricks-sdk."""

from __future__ import annotations

from launcher.cli.commands import ALIASES, COMMANDS  # noqa: F401 - the table, where it always was
from launcher.cli.error_report import run_cli
from launcher.cli.group import cli


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_cli(cli, argv))

"""The `launcher` command: its table of subcommands, and its entry point.

Subcommands are imported only when they are invoked, so `launcher --help` stays
fast and never pulls in pydantic, kubernetes, torch or databricks-sdk. The click group
itself is launcher.cli.group (`cli` here is it, imported on first use): the top-level
`--help` is printed from launcher.cli.helpcache without importing click at all.
"""

from __future__ import annotations

import sys

from launcher.cli.commands import ALIASES, COMMANDS  # noqa: F401 - the table, where it always was


def __getattr__(name: str):
    # `from launcher.cli.main import cli` keeps working; click is imported only then.
    if name == "cli":
        from launcher.cli.group import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    from launcher.cli import helpcache

    if helpcache.print_cached(sys.argv[1:] if argv is None else argv):
        sys.exit(0)
    from launcher.cli.error_report import run_cli
    from launcher.cli.group import cli

    sys.exit(run_cli(cli, argv))

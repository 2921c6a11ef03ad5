"""What the CLI commands share: finding runs, printing, confirming."""

from __future__ import annotations

import difflib
import json
import sys
from typing import TYPE_CHECKING, Any

import click
from click.shell_completion import CompletionItem

from launcher.sdk.index import RunIndex

if TYPE_CHECKING:
    from launcher.backends.base import SubmittedSpec

# How runs read (records, times, durations) is shared with the dashboard: it lives beside Run.
from launcher.sdk.records import ago, duration, run_record, to_yaml, when  # noqa: F401 - re-exported
from launcher.sdk.run_names import spec_name_of

# Commands take any form of run name: full, the spec's name, or a glob (launcher.sdk.run_names),
# resolved as the SDK resolves a run argument (a run that is not there is RunNotFound).
from launcher.sdk.runs import resolve as find_run  # noqa: F401 - re-exported for commands

OK, FAIL, INFO, WARN = "✔", "✗", "i", "!"


def info(message: str) -> None:
    click.echo(f"{INFO} {message}", err=True)


def warn(message: str) -> None:
    click.echo(f"{WARN} {message}", err=True)


def dump(obj: Any, fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps(obj, indent=2, default=str))
    else:
        click.echo(to_yaml(obj))


def print_table(table) -> None:
    """Print a rich table; when piped, wide enough that rows never wrap."""
    from rich.console import Console  # lazy: rich costs 3x `python -c pass`, for tables only

    console = Console(soft_wrap=True) if sys.stdout.isatty() else Console(width=400, soft_wrap=True)
    console.print(table)


def complete_run_names(ctx, param, incomplete: str) -> list:
    """Shell completion for run arguments: recent run names and their spec names, from the index."""
    try:
        names = RunIndex().names()[:200]
    except Exception:  # noqa: BLE001 - completion must never print a traceback into the shell
        return []
    out = list(dict.fromkeys(names + [spec_name_of(n) for n in names]))
    return [CompletionItem(n) for n in out if n.startswith(incomplete)]


class NounGroup(click.Group):
    """A verb that takes mcli's noun (`stop run NAME`, `delete secret NAME`) or goes
    straight to its default noun (`stop NAME`). Singular and plural nouns both work.
    `strict`: the default noun is taken only without arguments or before an option
    (`get`, `get --status failed`); any other first word must be a noun (`get foo` is a
    usage error with a did-you-mean, not a listing of runs matching foo)."""

    def __init__(self, *args, default: str, strict: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.default = default
        self.strict = strict

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is None and name.endswith("s"):
            cmd = super().get_command(ctx, name[:-1])
        if cmd is None:
            cmd = super().get_command(ctx, name + "s")
        return cmd

    def shell_complete(self, ctx, incomplete):
        # `stop <TAB>` offers the nouns and, for the short form, what the default noun takes.
        items = super().shell_complete(ctx, incomplete)
        default = super().get_command(ctx, self.default)
        arguments = [p for p in default.params if isinstance(p, click.Argument)] if default else []
        return items + (arguments[0].shell_complete(ctx, incomplete) if arguments else [])

    def parse_args(self, ctx, args):
        first = args[0] if args else None
        if first is not None and first not in ("-h", "--help") and self.get_command(ctx, first) is None:
            if self.strict and not first.startswith("-"):
                nouns = self.list_commands(ctx)
                guess = difflib.get_close_matches(first, nouns + [n.rstrip("s") for n in nouns], n=1, cutoff=0.6)
                hint = f"; did you mean {guess[0]!r}?" if guess else ""
                raise click.UsageError(
                    f"no such noun {first!r} for `{ctx.command_path}` (one of: {', '.join(nouns)}){hint}", ctx
                )
            args = [self.default, *args]
        return super().parse_args(ctx, args)


def confirm(question: str, yes: bool) -> bool:
    if yes:
        return True
    if not sys.stdin.isatty():
        raise click.UsageError("refusing to ask for confirmation without a terminal; pass -y")
    return click.confirm(question, default=False)


def instance(spec: SubmittedSpec) -> str:
    compute = spec.get("compute") or {}
    gpus = compute.get("gpus") or 0
    gpu_type = compute.get("gpu_type") or ("cpu" if not gpus else "gpu")
    nodes = compute.get("nodes") or 1
    return f"{gpus}x {gpu_type}" + (f" ({nodes} nodes)" if nodes > 1 else "")

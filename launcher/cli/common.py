"""What the CLI commands share: finding runs, printing records, confirming."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any

import click

# Commands take any form of run name: full, the spec's name, or a glob (launcher.backends.names).
from launcher.backends.names import resolve_run as find_run  # noqa: F401 - re-exported for commands

OK, FAIL, INFO, WARN = "✔", "✗", "i", "!"


def info(message: str) -> None:
    click.echo(f"{INFO} {message}", err=True)


def warn(message: str) -> None:
    click.echo(f"{WARN} {message}", err=True)


def when(ts: datetime | None) -> str:
    if ts is None:
        return "-"
    return ts.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def ago(ts: datetime | None) -> str:
    if ts is None:
        return "-"
    secs = int((datetime.now(timezone.utc) - ts).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit} ago"
    return f"{secs}s ago"


def duration(start: datetime | None, end: datetime | None) -> str:
    if start is None:
        return "-"
    secs = int(((end or datetime.now(timezone.utc)) - start).total_seconds())
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def to_yaml(obj: Any) -> str:
    """YAML with multi-line strings (commands) as readable | blocks."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def str_rep(dumper, value):
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, str_rep)
    return yaml.dump(obj, Dumper=Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True).rstrip()


def dump(obj: Any, fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps(obj, indent=2, default=str))
    else:
        click.echo(to_yaml(obj))


def print_table(table) -> None:
    """Print a rich table; when piped, wide enough that rows never wrap."""
    from rich.console import Console

    console = Console(soft_wrap=True) if sys.stdout.isatty() else Console(width=400, soft_wrap=True)
    console.print(table)


def complete_run_names(ctx, param, incomplete: str) -> list:
    """Shell completion for run arguments: recent run names and their spec names, from the index."""
    from click.shell_completion import CompletionItem

    from launcher.backends.names import spec_name_of
    from launcher.backends.registry import RunIndex

    try:
        names = RunIndex().names()[:200]
    except Exception:  # noqa: BLE001 - completion must never print a traceback into the shell
        return []
    out = list(dict.fromkeys(names + [spec_name_of(n) for n in names]))
    return [CompletionItem(n) for n in out if n.startswith(incomplete)]


class NounGroup(click.Group):
    """A verb that takes mcli's noun (`stop run NAME`, `delete secret NAME`) or goes
    straight to its default noun (`stop NAME`). Singular and plural nouns both work."""

    def __init__(self, *args, default: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.default = default

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
            args = [self.default, *args]
        return super().parse_args(ctx, args)


def confirm(question: str, yes: bool) -> bool:
    if yes:
        return True
    if not sys.stdin.isatty():
        raise click.UsageError("refusing to ask for confirmation without a terminal; pass -y")
    return click.confirm(question, default=False)


def run_record(run) -> dict[str, Any]:
    """A run as plain data, for -o json|yaml."""
    return {
        "name": run.name,
        "backend": run.backend,
        "cluster": run.cluster,
        "status": run.status.value,
        "reason": run.reason,
        "exit_code": run.exit_code,
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "ended_at": run.ended_at.isoformat() if run.ended_at else None,
        "attempts": [
            {
                "attempt": a.index,
                "status": a.status.value,
                "reason": a.reason,
                "started_at": a.started_at.isoformat() if a.started_at else None,
                "ended_at": a.ended_at.isoformat() if a.ended_at else None,
                "ranks": [{"rank": r.rank, "status": r.status.value, "exit_code": r.exit_code, "reason": r.reason,
                           "node": r.node} for r in a.ranks],
            }
            for a in run.attempts
        ],
        "events": [{"status": e.status.value, "at": e.at.isoformat(), "attempt": e.attempt, "reason": e.reason}
                   for e in run.events],
        "spec": run.spec,
    }


def instance(spec: dict[str, Any]) -> str:
    compute = spec.get("compute") or {}
    gpus = compute.get("gpus") or 0
    gpu_type = compute.get("gpu_type") or ("cpu" if not gpus else "gpu")
    nodes = compute.get("nodes") or 1
    return f"{gpus}x {gpu_type}" + (f" ({nodes} nodes)" if nodes > 1 else "")

"""The click group behind `launcher`: each subcommand is imported when it is invoked
(launcher.cli.commands holds the table), so `launcher --help` stays light."""

from __future__ import annotations

import importlib

import click

from launcher.cli.commands import ALIASES, COMMANDS


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        name = ALIASES.get(name, name)
        if name not in COMMANDS:
            return None
        module_name, attr, _ = COMMANDS[name]
        return getattr(importlib.import_module(module_name), attr)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        # Usage lines and errors name the command, not the alias typed (`launcher get`, not `launcher g`).
        _, cmd, rest = super().resolve_command(ctx, args)
        return (cmd.name if cmd is not None else None), cmd, rest

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        short = {command: alias for alias, command in ALIASES.items()}
        rows = [
            (f"{name} ({short[name]})" if name in short else name, COMMANDS[name][2])
            for name in self.list_commands(ctx)
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--debug",
    is_flag=True,
    envvar="LAUNCHER_DEBUG",
    help="Show tracebacks for errors, and count what the command reads (config, profiles, kubeconfigs).",
)
@click.version_option(package_name="launcher", prog_name="launcher")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """launcher: run LLM training on Kubernetes or on this machine.

    Start with `launcher run -f runspecs/hello.yaml --follow`.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug

"""mcli's command shapes that have no noun module of their own: `create secret <kind>`,
`version` and `completion`."""

from __future__ import annotations

from importlib.metadata import version as dist_version

import click
from click.shell_completion import get_completion_class

from launcher.cli.main import cli
from launcher.cli.secret import create as secret_create


def _secret_create_group():
    return secret_create


class _Create(click.Group):
    def list_commands(self, ctx):
        return ["secret"]

    def get_command(self, ctx, name):
        return _secret_create_group() if name in ("secret", "secrets") else None


create = _Create("create", help="Create a secret: `create secret <kind>` is `launcher secret create <kind>`.")


@click.command()
def version():
    """Print the launcher's version."""
    click.echo(f"launcher {dist_version('launcher')}")


SHELLS = ("bash", "zsh", "fish")


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell):
    """Print the shell completion script; commands, options and run names complete.

    \b
    Examples:
      eval "$(launcher completion bash)"                     # in ~/.bashrc
      launcher completion fish > ~/.config/fish/completions/launcher.fish
    """
    comp = get_completion_class(shell)(cli, {}, "launcher", "_LAUNCHER_COMPLETE")
    click.echo(comp.source())

"""`launcher exec`, `connect`, `interactive` and `port-forward`: into a run's ranks, as mcli's
`interactive`/`connect` and Run:ai's `exec`/`port-forward`. Each calls the SDK (launcher.sdk.attach)."""

from __future__ import annotations

import re
import sys

import click

from launcher.cli.common import OK, complete_run_names, info
from launcher.errors import InputError
from launcher.sdk.attach import create_interactive_run, exec_in_run
from launcher.sdk.attach import port_forward as forward

TMUX_SESSION = "launcher"


def _shell_argv(tmux: bool) -> list[str]:
    """The rank's shell: $SHELL, else bash, else sh, found in the rank; in tmux when asked and there."""
    shell = 's="${SHELL:-}"; [ -n "$s" ] && command -v "$s" >/dev/null 2>&1 || s=$(command -v bash) || s=sh; '
    if tmux:
        # A socket per run and rank: on the local backend every rank shares this machine's /tmp.
        shell += (
            f'if command -v tmux >/dev/null 2>&1; then exec tmux -L "launcher-$RUN_NAME-$NODE_RANK" '
            f"new -A -s {TMUX_SESSION}; fi; "
            'echo "[launcher] tmux is not installed in this rank: a plain shell instead" >&2; '
        )
    return ["/bin/sh", "-c", shell + 'exec "$s" -i']


@click.command("exec", context_settings={"ignore_unknown_options": True})
@click.argument("name", shell_complete=complete_run_names)
@click.option("--rank", "-r", "rank", type=int, default=0, show_default=True, help="The node rank to run in.")
@click.argument("argv", nargs=-1, type=click.UNPROCESSED, metavar="-- CMD...")
def exec_command(name, rank, argv):
    """Run a command in a rank of a run, with the rank's environment (the run's secrets
    included) in its working directory, and exit with the command's exit code. The command
    gets a terminal when stdin is one.

    \b
    Examples:
      launcher exec hello -- cat /mnt/config/parameters.yaml
      launcher exec hello --rank 1 -- nvidia-smi
    """
    argv = list(argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise InputError("no command to run", hint=f"give it after --: `launcher exec {name} -- CMD...`")
    sys.exit(exec_in_run(name, argv, rank=rank, tty=sys.stdin.isatty()))


@click.command("connect")
@click.argument("name", shell_complete=complete_run_names)
@click.option("--rank", "-r", "rank", type=int, default=0, show_default=True, help="The node rank to connect to.")
@click.option("--tmux", is_flag=True, help="Attach to (or start) the rank's tmux session `launcher`.")
def connect(name, rank, tmux):
    """Open a shell in a rank of a run ($SHELL, else bash, else sh), with the rank's
    environment in its working directory. Leaving the shell leaves the run running.

    \b
    Examples:
      launcher connect hello
      launcher connect hello --rank 1
    """
    info(f"Connecting to rank {rank} of run {name}; leave the shell with `exit` (the run goes on).")
    sys.exit(exec_in_run(name, _shell_argv(tmux), rank=rank, tty=sys.stdin.isatty()))


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)\s*$", re.IGNORECASE)
_PER_HOUR = {"s": 1 / 3600, "m": 1 / 60, "h": 1.0, "d": 24.0, "": 1.0}


def parse_duration(value: str) -> float:
    """Hours, from 2h, 90m, 3600s, 1d or a plain number of hours."""
    m = _DURATION.match(value)
    if not m or not float(m.group(1)) > 0:
        raise InputError(f"--max-duration {value!r} is not a duration", hint="give e.g. 2h, 90m, 3600s or 1.5 (hours)")
    return float(m.group(1)) * _PER_HOUR[m.group(2).lower()]


@click.command("interactive")
@click.option(
    "--max-duration",
    "max_duration",
    required=True,
    metavar="DURATION",
    help="How long the run waits for you (2h, 90m, or hours); required, so that nothing idles forever.",
)
@click.option("--gpus", "--gpu-num", "gpus", type=int, help="GPUs for the run (compute.gpus).")
@click.option("--cluster", help="The cluster profile to run on.")
@click.option("--image", help="The Docker image.")
@click.option("--tmux", is_flag=True, help="Open the shell in a tmux session, where tmux is in the rank.")
@click.option(
    "-f",
    "--file",
    "spec_file",
    type=click.Path(dir_okay=False),
    help="A run YAML to start from (its integrations run; its command is replaced).",
)
@click.option("--rank", "-r", "rank", type=int, default=0, show_default=True, help="The node rank to open it in.")
def interactive(max_duration, gpus, cluster, image, tmux, spec_file, rank):
    """Start a run that waits (its integrations run, then it sleeps until --max-duration) and
    open a shell in rank 0 at once. When the connection drops the run goes on:
    `launcher connect RUN` gets back in, and `launcher stop RUN` ends it.

    \b
    Examples:
      launcher interactive --max-duration 2h
      launcher interactive --max-duration 30m --gpus 8 --tmux
    """
    run = create_interactive_run(parse_duration(max_duration), file=spec_file, gpus=gpus, cluster=cluster, image=image)
    click.echo(f"{OK} Interactive run {run.name} submitted; it ends by itself after {max_duration}.", err=True)
    info(f"Get back in with `launcher connect {run.name}`, end it with `launcher stop {run.name}`.")
    sys.exit(exec_in_run(run.name, _shell_argv(tmux), rank=rank, tty=sys.stdin.isatty()))


_PORTS = re.compile(r"^(\d+):(\d+)$|^(\d+)$")


def parse_ports(value: str) -> tuple[int, int]:
    """LOCAL:REMOTE (or PORT for both) as two ports; LOCAL may be 0 for any free port."""
    m = _PORTS.match(value.strip())
    if not m:
        raise InputError(f"{value!r} is not LOCAL:REMOTE", hint="e.g. `6006:6006`, or `0:6006` for any free port")
    local, remote = (int(m.group(1)), int(m.group(2))) if m.group(1) else (int(m.group(3)), int(m.group(3)))
    for what, port, low in (("LOCAL", local, 0), ("REMOTE", remote, 1)):
        if not low <= port <= 65535:
            raise InputError(f"{what} port {port} is not a TCP port ({low} to 65535)")
    return local, remote


@click.command("port-forward")
@click.argument("name", shell_complete=complete_run_names)
@click.argument("ports", metavar="LOCAL:REMOTE")
@click.option("--rank", "-r", "rank", type=int, default=0, show_default=True, help="The node rank whose port to serve.")
def port_forward(name, ports, rank):
    """Serve a rank's port (TensorBoard, Jupyter, a debugger) on 127.0.0.1:LOCAL until Ctrl-C.

    \b
    Examples:
      launcher port-forward hello 6006:6006
      launcher port-forward hello --rank 1 0:8888
    """
    local, remote = parse_ports(ports)

    def ready(port: int) -> None:
        click.echo(
            f"Forwarding 127.0.0.1:{port} -> rank {rank} of run {name}, port {remote} (Ctrl-C to stop)", err=True
        )

    try:
        forward(name, rank, local, remote, ready=ready)
    except KeyboardInterrupt:
        pass


def port_forward_command(run_name: str, port: int, rank: int = 0) -> str:
    """The command `describe` shows for a port the spec declares."""
    return f"launcher port-forward {run_name} {'--rank ' + str(rank) + ' ' if rank else ''}{port}:{port}"

"""`launcher exec`, `connect`, `interactive` and `port-forward`: into a run's ranks, as mcli's
`interactive`/`connect` and Run:ai's `exec`/`port-forward`. Each calls the SDK (launcher.sdk.attach)."""

from __future__ import annotations

import re
import sys

import click

from launcher.cli.common import OK, complete_run_names, info, warn
from launcher.errors import InputError, LauncherError
from launcher.sdk.attach import create_interactive_run, exec_in_run
from launcher.sdk.attach import port_forward as forward

TMUX_SESSION = "launcher"


def _shell_argv(tmux: bool, tty: bool) -> list[str]:
    """The rank's shell: $SHELL, else bash, else sh, found in the rank; in tmux when asked and there.
    Interactive (-i) on a terminal only: without one (commands piped in) an interactive bash
    prints job-control warnings and a prompt per line; a plain shell runs what it reads."""
    shell = 's="${SHELL:-}"; [ -n "$s" ] && command -v "$s" >/dev/null 2>&1 || s=$(command -v bash) || s=sh; '
    if tmux:
        # A socket per run and rank: on the local backend every rank shares this machine's /tmp.
        shell += (
            f'if command -v tmux >/dev/null 2>&1; then exec tmux -L "launcher-$RUN_NAME-$NODE_RANK" '
            f"new -A -s {TMUX_SESSION}; fi; "
            'echo "[launcher] tmux is not installed in this rank: a plain shell instead" >&2; '
        )
    return ["/bin/sh", "-c", shell + ('exec "$s" -i' if tty else 'exec "$s"')]


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


CONTAINER = "main"  # a rank's one container (the Kubernetes pod's `main`; mcli's MAIN)


def _container(value: str | None) -> None:
    """mcli's --container: its default, MAIN, is the only one a rank here has."""
    if value is not None and value.strip().lower() != CONTAINER:
        raise InputError(
            f"--container {value!r}: a rank has one container, {CONTAINER} (mcli's MAIN)",
            hint="leave --container out, or give --container main",
        )


def _argv(command: str | None, tmux: bool, tty: bool) -> list[str]:
    """What runs in the rank: mcli's --command through sh -c, else a shell (in tmux if asked)."""
    if command is not None and tmux:
        raise click.UsageError("--command and --tmux do not go together: the command runs instead of a shell")
    if command is not None:
        if not command.strip():
            raise InputError("--command is empty", hint="give the command to run, e.g. --command 'nvidia-smi'")
        return ["/bin/sh", "-c", command]
    return _shell_argv(tmux, tty)


def _running_run(latest: bool) -> str:
    """The run `connect` without NAME means: with --latest the newest STARTING or RUNNING
    run, else the only one (several are an error naming them; mcli asks which)."""
    from launcher import sdk

    runs = sdk.get_runs(status=["STARTING", "RUNNING"], limit=1 if latest else 11)
    for message in runs.warnings:
        warn(message)
    if not runs:
        raise LauncherError("no STARTING or RUNNING run to connect to", hint="`launcher get runs` lists them all")
    if len(runs) > 1:
        shown = ", ".join(r.name for r in runs[:10]) + (", ..." if len(runs) > 10 else "")
        raise InputError(
            f"{len(runs)} runs are running ({shown}): name the one to connect to",
            hint="`launcher connect NAME`, or `launcher connect --latest` for the newest",
        )
    return runs[0].name


rank_opt = click.option("--rank", "-r", "rank", type=int, default=0, show_default=True, help="The node rank.")
container_opt = click.option(
    "--container", metavar="CONTAINER", help="mcli's: the rank's container; each has one, main (MAIN)."
)
command_opt = click.option(
    "--command", metavar="CMD", help="Run this command (through sh -c) instead of a shell, and exit with its code."
)
tmux_opt = click.option("--tmux", is_flag=True, help="Attach to (or start) the rank's tmux session `launcher`.")


@click.command("connect")
@click.argument("name", required=False, shell_complete=complete_run_names)
@click.option("-l", "--latest", is_flag=True, help="The newest STARTING or RUNNING run.")
@rank_opt
@container_opt
@command_opt
@tmux_opt
def connect(name, latest, rank, container, command, tmux):
    """Open a shell in a rank of a run ($SHELL, else bash, else sh), with the rank's
    environment in its working directory; or run --command there. Leaving the shell leaves
    the run running. Without NAME, the one running run (--latest: the newest).

    \b
    Examples:
      launcher connect hello
      launcher connect hello --rank 1
      launcher connect --latest --command 'nvidia-smi'
    """
    if name and latest:
        raise click.UsageError("give a run NAME or --latest, not both")
    _container(container)
    tty = sys.stdin.isatty()
    argv = _argv(command, tmux, tty)
    name = name or _running_run(latest)
    if command is None:
        info(f"Connecting to rank {rank} of run {name}; leave the shell with `exit` (the run goes on).")
    sys.exit(exec_in_run(name, argv, rank=rank, tty=tty))


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)\s*$", re.IGNORECASE)
_PER_HOUR = {"s": 1 / 3600, "m": 1 / 60, "h": 1.0, "d": 24.0, "": 1.0}


def parse_duration(value: str, flag: str = "--max-duration") -> float:
    """Hours, from 2h, 90m, 3600s, 1d or a plain number of hours."""
    m = _DURATION.match(value)
    if not m or not float(m.group(1)) > 0:
        raise InputError(f"{flag} {value!r} is not a duration", hint="give e.g. 2h, 90m, 3600s or 1.5 (hours)")
    return float(m.group(1)) * _PER_HOUR[m.group(2).lower()]


def _session_hours(hours_arg: str | None, hours: str | None, max_duration: str | None) -> tuple[float, str]:
    """mcli's three spellings of an interactive run's length (HOURS, --hours, --max-duration):
    exactly one, as hours, and as typed."""
    given = [(flag, v) for flag, v in (("HOURS", hours_arg), ("--hours", hours), ("--max-duration", max_duration)) if v]
    if not given:
        raise click.UsageError(
            "how long should the run wait for you? give HOURS (`launcher interactive 2`), --hours 2 "
            "or --max-duration 2h: it is required, so that nothing idles forever"
        )
    if len(given) > 1:
        raise click.UsageError(f"the length is given twice ({' and '.join(f for f, _ in given)}): give one of them")
    flag, value = given[0]
    return parse_duration(value, flag), value + ("" if value.strip()[-1:].isalpha() else "h")


@click.command("interactive")
@click.argument("hours_arg", metavar="[HOURS]", required=False)
@click.option("--hours", metavar="HOURS", help="How long the run waits for you, in hours (mcli's; or 2h, 90m).")
@click.option(
    "--max-duration",
    "max_duration",
    metavar="DURATION",
    help="The same as --hours: 2h, 90m, or hours. One of HOURS, --hours and --max-duration is required.",
)
@click.option("--name", help="The run's name (default: interactive), as a spec's name: a suffix makes it unique.")
@click.option("--gpus", "--gpu-num", "gpus", type=int, help="GPUs for the run (compute.gpus).")
@click.option("--gpu-type", help="The GPU type (compute.gpu_type), e.g. h100_80gb.")
@click.option("--nodes", type=int, help="Nodes for the run (compute.nodes).")
@click.option("--cluster", "--platform", "cluster", help="The cluster profile to run on.")
@click.option("--image", help="The Docker image.")
@click.option("--no-connect", "no_connect", is_flag=True, help="Submit, wait until it runs, and do not connect.")
@click.option(
    "-f",
    "--file",
    "spec_file",
    type=click.Path(dir_okay=False),
    help="A run YAML to start from (its integrations run; its command is replaced).",
)
@rank_opt
@container_opt
@command_opt
@tmux_opt
def interactive(
    hours_arg, hours, max_duration, name, gpus, gpu_type, nodes, cluster, image, no_connect, spec_file, rank, **attach
):
    """Start a run that waits (its integrations run, then it sleeps for HOURS) and open a
    shell in rank 0 at once (or run --command there). When the connection drops the run
    goes on: `launcher connect RUN` gets back in, and `launcher stop RUN` ends it.

    \b
    Examples:
      launcher interactive 2 --no-connect
      launcher interactive --hours 0.5 --gpus 8 --gpu-type h100_80gb --tmux
      launcher interactive --max-duration 30m --name debug --command 'nvidia-smi'
    """
    session, shown = _session_hours(hours_arg, hours, max_duration)
    _container(attach["container"])
    tty = sys.stdin.isatty()
    argv = _argv(attach["command"], attach["tmux"], tty)
    run = create_interactive_run(
        session,
        file=spec_file,
        gpus=gpus,
        cluster=cluster,
        image=image,
        name=name,
        gpu_type=gpu_type,
        nodes=nodes,
    )
    click.echo(f"{OK} Interactive run {run.name} submitted; it ends by itself after {shown}.", err=True)
    info(f"Get back in with `launcher connect {run.name}`, end it with `launcher stop {run.name}`.")
    if no_connect:
        from launcher.sdk.runs import wait_for_run_status

        ready = wait_for_run_status(run.name, "RUNNING")
        if ready.status.is_terminal:
            why = f": {ready.reason}" if ready.reason else ""
            raise LauncherError(f"run {run.name} ended before it ran ({ready.status.value}{why})")
        click.echo(f"{OK} Run {run.name} is {ready.status.value}.", err=True)
        return
    sys.exit(exec_in_run(run.name, argv, rank=rank, tty=tty))


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

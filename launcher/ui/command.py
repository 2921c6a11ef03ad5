"""`launcher ui`: a read-only web dashboard of every run, with live logs and loss curves."""

from __future__ import annotations

import errno
import ipaddress
import secrets
import socket
import webbrowser

import click

from launcher.errors import InputError


@click.command("ui")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="The port to listen on (0: any free port).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address to bind. Any address but loopback needs a token.",
)
@click.option(
    "--token",
    envvar="LAUNCHER_UI_TOKEN",
    metavar="TOKEN",
    help="Every request must carry this token (off loopback: at least 16 characters, "
    "generated when not given). "
    "Also read from LAUNCHER_UI_TOKEN.",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the dashboard in a web browser.")
# A whole request (the dashboard's are GETs) in 10 s; 500 connections, well under the usual
# limit of 1024 open files.
@click.option(
    "--request-timeout",
    type=click.FloatRange(0, 3600, min_open=True),
    default=10.0,
    show_default=True,
    envvar="LAUNCHER_UI_REQUEST_TIMEOUT",
    metavar="SECONDS",
    help="A connection whose request (head and body) is not all in within this many seconds "
    "is closed. Also read from LAUNCHER_UI_REQUEST_TIMEOUT.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1, 100_000),
    default=500,
    show_default=True,
    envvar="LAUNCHER_UI_MAX_CONNECTIONS",
    metavar="N",
    help="Connections served at once; past them a request is answered 503. Also read from LAUNCHER_UI_MAX_CONNECTIONS.",
)
def ui(
    port: int, host: str, token: str | None, open_browser: bool, request_timeout: float, max_connections: int
) -> None:
    """Serve a read-only dashboard of the runs of every cluster profile: statuses that
    update live, each run's spec, attempts, events, streamed logs and loss curves, and
    several runs' curves overlaid.

    Needs the `ui` extra: pip install 'launcher[ui]'.
    """
    try:
        import uvicorn

        from launcher.ui.app import LOOPBACK_HOSTS, create_app
        from launcher.ui.server import server_config
    except ImportError as e:
        raise InputError(
            f"`launcher ui` needs the ui extra ({e.name} is not installed)", hint="pip install 'launcher[ui]'"
        ) from None

    loopback = host in LOOPBACK_HOSTS  # ::1 is not: it would need [::1] Host names; it takes a token
    generated = False
    if not loopback and not token:
        token = secrets.token_urlsafe(24)
        generated = True
    elif not loopback and not _is_loopback_address(host):
        _check_open_token(token, host)
    # Bind first, so a busy port is a clear error and port 0 tells us the port chosen.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)  # connections queue from now on, before uvicorn starts serving
    except OSError as e:
        sock.close()
        raise InputError(
            f"cannot listen on {host}:{port}: {e.strerror}",
            hint="pick another port with --port" if e.errno == errno.EADDRINUSE else None,
        ) from None
    port = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{port}/"
    app = create_app(token=token, allowed_hosts=LOOPBACK_HOSTS if loopback else None)
    if generated:
        click.echo(
            f"i {host} is not loopback, so every request needs a token; generated one "
            "(pass --token or LAUNCHER_UI_TOKEN to choose it).",
            err=True,
        )
        click.echo(f"✔ Dashboard at {url}?token={token}", err=True)
    else:
        click.echo(f"✔ Dashboard at {url}", err=True)
        if token:
            click.echo("i Every request needs the token you gave: open the address with ?token=… once.", err=True)
    click.echo("i Read-only. Ctrl-C to stop.", err=True)
    if open_browser:
        webbrowser.open(url + (f"?token={token}" if token else ""))  # the user's own browser
    config = server_config(app, request_timeout=request_timeout, max_connections=max_connections)
    uvicorn.Server(config).run(sockets=[sock])


MIN_TOKEN_LENGTH = 16


def _is_loopback_address(host: str) -> bool:
    """::1 or 127.0.0.2: a token is needed there (a Host check would refuse their names),
    but only this machine can reach them, so any token is taken, as on 127.0.0.1."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name


def _check_open_token(token: str, host: str) -> None:
    """A token that others could guess, or that no header can carry, is refused off
    loopback. The message never shows it: it is a secret."""
    problem = None
    if len(token) < MIN_TOKEN_LENGTH:
        problem = f"is {len(token)} character{'s' if len(token) != 1 else ''} long"
    elif any(c.isspace() or not c.isprintable() for c in token):
        problem = "holds a space or a control character"
    if problem:
        raise InputError(
            f"--token (or LAUNCHER_UI_TOKEN) {problem}: a dashboard on {host}, an address others "
            f"can reach, needs a token of at least {MIN_TOKEN_LENGTH} characters, none of them "
            "spaces or control characters",
            hint="leave --token out and `launcher ui` generates one and prints it",
        )

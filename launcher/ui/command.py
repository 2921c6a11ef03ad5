"""`launcher ui`: a read-only web dashboard of every run, with live logs and loss curves."""

from __future__ import annotations

import errno
import math
import secrets
import socket
import string
import webbrowser

import click

from launcher.errors import InputError
from launcher.ui.guards import MAX_STREAMS, MAX_STREAMS_PER_CLIENT

MIN_TOKEN_BITS = 128
GENERATED_TOKEN_BYTES = 32  # 256 bits, 43 characters
MIN_DISTINCT = 8  # "abababab…" holds far less than its kinds of characters could


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
    help="Every request must carry this token: at least 128 bits, such as 22 random letters, digits, "
    "'-' and '_' or 32 random hex digits (generated when not given). Also read from LAUNCHER_UI_TOKEN.",
)
@click.option(
    "--no-token",
    is_flag=True,
    help="Serve without a token, on 127.0.0.1 or localhost only: every local user of this machine "
    "then reads every run's spec and logs.",
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
@click.option(
    "--max-streams",
    type=click.IntRange(1, 10_000),
    default=MAX_STREAMS,
    show_default=True,
    envvar="LAUNCHER_UI_MAX_STREAMS",
    metavar="N",
    help="Log streams (server-sent events) served at once, to all clients; one more is answered 503. "
    "Also read from LAUNCHER_UI_MAX_STREAMS.",
)
@click.option(
    "--max-streams-per-client",
    type=click.IntRange(1, 10_000),
    default=MAX_STREAMS_PER_CLIENT,
    show_default=True,
    envvar="LAUNCHER_UI_MAX_STREAMS_PER_CLIENT",
    metavar="N",
    help="Log streams served at once to one client address; one more is answered 503. "
    "Also read from LAUNCHER_UI_MAX_STREAMS_PER_CLIENT.",
)
def ui(
    port: int,
    host: str,
    token: str | None,
    no_token: bool,
    open_browser: bool,
    request_timeout: float,
    max_connections: int,
    max_streams: int,
    max_streams_per_client: int,
) -> None:
    """Serve a read-only dashboard of the runs of every cluster profile: statuses that
    update live, each run's spec, attempts, events, streamed logs and loss curves, and
    several runs' curves overlaid.

    Every request needs a token, generated and printed in the dashboard's address unless
    given (--token) or, on loopback, turned off (--no-token).

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
    if no_token:
        if token:
            raise InputError("--no-token and --token (or LAUNCHER_UI_TOKEN) contradict each other; give one")
        if not loopback:
            raise InputError(
                f"--no-token serves only on {' or '.join(LOOPBACK_HOSTS)}: on {host} others could read "
                "every run's spec and logs",
                hint="leave --no-token out: `launcher ui` generates a token and prints it in the address",
            )
    elif token:
        check_token(token)
    else:
        token = secrets.token_urlsafe(GENERATED_TOKEN_BYTES)
        generated = True
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
    app = create_app(
        token=token,
        allowed_hosts=LOOPBACK_HOSTS if loopback else None,
        max_streams=max_streams,
        max_streams_per_client=max_streams_per_client,
    )
    if generated:
        click.echo(
            "i Every request needs this token (--token or LAUNCHER_UI_TOKEN chooses it; "
            "--no-token on loopback serves without one).",
            err=True,
        )
        click.echo(f"✔ Dashboard at {url}?token={token}", err=True)
    else:
        click.echo(f"✔ Dashboard at {url}", err=True)
        if token:
            click.echo("i Every request needs the token you gave: open the address with ?token=… once.", err=True)
        else:
            click.echo("! No token: every local user of this machine can read every run's spec and logs.", err=True)
    click.echo("i Read-only. Ctrl-C to stop.", err=True)
    if open_browser:
        webbrowser.open(url + (f"?token={token}" if token else ""))  # the user's own browser
    config = server_config(app, request_timeout=request_timeout, max_connections=max_connections)
    uvicorn.Server(config).run(sockets=[sock])


def token_bits(token: str) -> float:
    """The most a token of this length and these kinds of characters can hold, in bits,
    had each character been drawn at random: 4 a hex digit, else log2 of the characters of
    its kinds (digits 10, lowercase 26, uppercase 26, other ASCII 33, any other 128)."""
    if set(token) <= set(string.hexdigits):
        return 4.0 * len(token)
    kinds = (
        (string.digits, 10),
        (string.ascii_lowercase, 26),
        (string.ascii_uppercase, 26),
        (string.punctuation, 33),
    )
    pool = sum(size for chars, size in kinds if any(c in chars for c in token))
    pool += 128 if any(not c.isascii() for c in token) else 0
    return len(token) * math.log2(pool)


def check_token(token: str) -> None:
    """A token that others could guess, or that no header can carry, is refused (the local
    users of a machine reach its loopback too). The message never shows it: it is a secret."""
    problem = None
    if any(c.isspace() or not c.isprintable() for c in token):
        problem = "holds a space or a control character"
    elif (bits := token_bits(token)) < MIN_TOKEN_BITS:
        problem = f"holds at most {bits:.0f} bits ({len(token)} characters of its kinds)"
    elif len(set(token)) < MIN_DISTINCT:
        problem = f"repeats {len(set(token))} characters"
    if problem:
        raise InputError(
            f"--token (or LAUNCHER_UI_TOKEN) {problem}: a dashboard token needs at least {MIN_TOKEN_BITS} "
            "random bits, such as 22 random letters, digits, '-' and '_' or 32 random hex digits, "
            "none of them spaces or control characters",
            hint="leave --token out and `launcher ui` generates one and prints it "
            "(or make one: python -c 'import secrets; print(secrets.token_urlsafe(32))')",
        )

"""`launcher ui`: a read-only web dashboard of every run, with live logs and loss curves."""

from __future__ import annotations

import click


@click.command("ui")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The port to listen on (0: any free port).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to bind. Any address but loopback needs a token.")
@click.option("--token", envvar="LAUNCHER_UI_TOKEN", metavar="TOKEN",
              help="Every request must carry this token (required, or generated, off loopback). "
                   "Also read from LAUNCHER_UI_TOKEN.")
@click.option("--open", "open_browser", is_flag=True, help="Open the dashboard in a web browser.")
def ui(port: int, host: str, token: str | None, open_browser: bool) -> None:
    """Serve a read-only dashboard of the runs of every cluster profile: statuses that
    update live, each run's spec, attempts, events, streamed logs and loss curves, and
    several runs' curves overlaid.

    Needs the `ui` extra: pip install 'launcher[ui]'.
    """
    import errno
    import secrets
    import socket

    from launcher.errors import InputError

    try:
        import uvicorn

        from launcher.ui.app import LOOPBACK_HOSTS, create_app
    except ImportError as e:
        raise InputError(f"`launcher ui` needs the ui extra ({e.name} is not installed)",
                         hint="pip install 'launcher[ui]'") from None

    loopback = host in LOOPBACK_HOSTS  # ::1 is not: it would need [::1] Host names; it takes a token
    generated = False
    if not loopback and not token:
        token = secrets.token_urlsafe(24)
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
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror}",
                         hint="pick another port with --port" if e.errno == errno.EADDRINUSE else None) from None
    port = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{port}/"
    app = create_app(token=token, allowed_hosts=LOOPBACK_HOSTS if loopback else None)
    if generated:
        click.echo(f"i {host} is not loopback, so every request needs a token; generated one "
                   "(pass --token or LAUNCHER_UI_TOKEN to choose it).", err=True)
        click.echo(f"✔ Dashboard at {url}?token={token}", err=True)
    else:
        click.echo(f"✔ Dashboard at {url}", err=True)
        if token:
            click.echo("i Every request needs the token you gave: open the address with ?token=… once.", err=True)
    click.echo("i Read-only. Ctrl-C to stop.", err=True)
    if open_browser:
        import webbrowser

        webbrowser.open(url + (f"?token={token}" if token else ""))  # the user's own browser
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[sock])
